# C++ source without its comments, for tests/lint/architecture.sh: what a rule
# about code should see. String and character literals (raw strings too) are
# kept as they are, so a `//` inside "http://..." is not taken for a comment.
#
#   PAT=ERE [ICASE=1] awk -f cxx_code.awk FILE...   prints FILE:LINE:CODE for each
#                                                    line whose code matches PAT
#   awk -f cxx_code.awk FILE                         prints every line's code (line
#                                                    numbers kept: one line out per line in)
# PAT comes through the environment so that its backslashes reach the regex as written.

BEGIN {
    pat = ENVIRON["PAT"]
    icase = ENVIRON["ICASE"] == "1"
    if (icase) pat = tolower(pat)
}

FNR == 1 { in_block = 0; in_raw = 0 }

{
    line = $0
    out = ""
    n = length(line)
    i = 1
    while (i <= n) {
        if (in_block) {
            j = index(substr(line, i), "*/")
            if (!j) { i = n + 1; break }
            i += j + 1
            in_block = 0
            out = out " "
            continue
        }
        if (in_raw) {
            j = index(substr(line, i), raw_end)
            if (!j) { out = out substr(line, i); i = n + 1; break }
            out = out substr(line, i, j - 1 + length(raw_end))
            i += j - 1 + length(raw_end)
            in_raw = 0
            continue
        }
        # Jump to the next character that may start a comment or a literal.
        rest = substr(line, i)
        if (!match(rest, /[\/"'R]/)) { out = out rest; break }
        out = out substr(rest, 1, RSTART - 1)
        i += RSTART - 1
        c = substr(line, i, 1)
        prev = i > 1 ? substr(line, i - 1, 1) : ""
        if (c == "/") {
            c2 = substr(line, i + 1, 1)
            if (c2 == "/") break
            if (c2 == "*") { in_block = 1; i += 2; continue }
            out = out c; i++
            continue
        }
        if (c == "R") {
            # A raw string: R"delim( ... )delim", perhaps over several lines.
            # R is one when it follows no identifier character, or follows a prefix (u8R, LR, uR, UR).
            before = substr(line, 1, i - 1)
            if (substr(line, i + 1, 1) == "\"" && (prev !~ /[A-Za-z0-9_]/ || before ~ /(^|[^A-Za-z0-9_])(u8|u|U|L)$/)) {
                open = index(substr(line, i + 2), "(")
                if (open) {
                    delim = substr(line, i + 2, open - 1)
                    raw_end = ")" delim "\""
                    out = out substr(line, i, 2 + open)
                    i += 2 + open
                    in_raw = 1
                    continue
                }
            }
            out = out c; i++
            continue
        }
        if (c == "'" && prev ~ /[0-9A-Fa-f]/ && substr(line, i + 1, 1) ~ /[0-9A-Fa-f]/) {
            out = out c; i++          # a digit separator: 1'000'000
            continue
        }
        # A string or character literal: copied through to its closing quote.
        j = i + 1
        while (j <= n) {
            d = substr(line, j, 1)
            if (d == "\\") { j += 2; continue }
            if (d == c) break
            j++
        }
        out = out substr(line, i, j - i + 1)
        i = j + 1
    }
    if (pat == "") print out
    else if ((icase ? tolower(out) : out) ~ pat) print FILENAME ":" FNR ":" out
}
