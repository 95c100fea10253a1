# The data members of one struct or class, for tests/lint/architecture.sh.
#
#   awk -f cxx_code.awk FILE | NAME=Services awk -f struct_members.awk
#
# reads code without comments (cxx_code.awk's) and prints LINE<TAB>MEMBER for each
# data member declared directly in the first definition of struct/class NAME:
# every declaration in its braces but functions (declared or defined), constructors,
# operators, types, aliases, friends and static_asserts. `int a, b;` is two members.
# Exits 2 when there is no such definition.

function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }

# Parentheses and what they hold removed, nested ones too.
function unparen(s) { while (gsub(/\([^()]*\)/, "", s)); return s }

# A function's head (what comes before its body's brace): a parameter list not on
# the right of an `=`, so that `std::function<void()> f = [](int) {...}` stays a member.
function is_function_head(head,    h) {
    if (head !~ /\(/) return 0
    h = unparen(head)
    return h !~ /=/
}

function classify(stmt, line,    h, parts, k, count, name) {
    stmt = trim(stmt)
    while (sub(/^\[\[[^]]*\]\][ \t]*/, "", stmt));
    if (stmt == "") return
    if (stmt ~ /^(using|typedef|friend|static_assert|template|namespace)([^A-Za-z0-9_]|$)/) return
    if (stmt ~ /^(enum|struct|class|union)([^A-Za-z0-9_]|$)/ &&
        (stmt ~ /\{/ || stmt ~ /^(enum|struct|class|union)([ \t]+(class|struct))?[ \t]+[A-Za-z0-9_:]+([ \t]*:[^;]*)?$/))
        return                                          # a nested type, defined or declared
    if (stmt ~ /(^|[^A-Za-z0-9_])operator([^A-Za-z0-9_]|$)/) return
    h = stmt
    while (gsub(/\{[^{}]*\}/, "", h));                  # brace initializers
    if (index(h, "=")) h = substr(h, 1, index(h, "=") - 1)  # `= value`, `= default`, `= 0`
    h = trim(h)
    if (h ~ /\([ \t]*[*&]/) {
        # a pointer to a function: a member
    } else if (h ~ /\)[ \t]*((const|volatile|noexcept|override|final|&|&&)[ \t]*)*(->.*)?$/) {
        return                                          # a function's declaration
    }
    if (match(h, /\([ \t]*[*&][ \t]*[A-Za-z_][A-Za-z0-9_]*/)) {  # void (*name)(int)
        name = substr(h, RSTART, RLENGTH); sub(/^\([ \t]*[*&][ \t]*/, "", name)
        print line "\t" name
        return
    }
    h = stmt
    while (gsub(/\{[^{}]*\}/, "", h));
    h = unparen(h)
    while (gsub(/<[^<>]*>/, "", h));                    # template arguments and their commas
    count = split(h, parts, ",")
    for (k = 1; k <= count; k++) {
        name = parts[k]
        if (index(name, "=")) name = substr(name, 1, index(name, "=") - 1)
        sub(/[ \t]*:[ \t]*[0-9]+[ \t]*$/, "", name)     # a bit-field's width
        gsub(/\[[^]]*\][ \t]*/, "", name)                # an array's bounds
        if (match(name, /[A-Za-z_][A-Za-z0-9_]*[ \t]*$/)) name = trim(substr(name, RSTART, RLENGTH))
        print line "\t" name
    }
}

{ code[FNR] = $0 }

END {
    name = ENVIRON["NAME"]
    head = "(^|[^A-Za-z0-9_])(struct|class)[ \t]+" name "([^A-Za-z0-9_;]|$)"
    for (l = 1; l <= FNR; l++)
        if (code[l] ~ head && code[l] !~ ("(struct|class)[ \t]+" name "[ \t]*;")) { start = l; break }
    if (!start) exit 2
    depth = 0; stmt = ""; sline = 0; done = 0
    for (l = start; l <= FNR && !done; l++) {
        s = code[l]; n = length(s)
        for (i = 1; i <= n; i++) {
            c = substr(s, i, 1)
            if (!depth) { if (c == "{") depth = 1; continue }
            if (c == "\"" || c == "'") {               # a literal: skipped, its braces and semicolons too
                for (j = i + 1; j <= n; j++) {
                    d = substr(s, j, 1)
                    if (d == "\\") { j++; continue }
                    if (d == c) break
                }
                stmt = stmt "0"; i = j
                continue
            }
            if (c == "{") { depth++; stmt = stmt c; continue }
            if (c == "}") {
                if (--depth == 0) { done = 1; break }
                stmt = stmt c
                if (depth == 1 && is_function_head(substr(stmt, 1, index(stmt, "{") - 1))) { stmt = ""; sline = 0 }
                continue
            }
            if (depth == 1 && c == ";") { classify(stmt, sline); stmt = ""; sline = 0; continue }
            if (depth == 1 && c == ":" && trim(stmt) ~ /^(public|private|protected)$/) { stmt = ""; sline = 0; continue }
            if (!sline && c !~ /[ \t]/) sline = l
            stmt = stmt c
        }
        stmt = stmt " "
    }
}
