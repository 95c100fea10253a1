// A small model of `kustomize build`, enough to check what an overlay's
// patches produce (validate.mjs checks each patched document like a file).
// No kustomize binary is needed: CI machines have none.
//
// Modelled: resources (files and directories with a kustomization), components,
// and patches, by file (path:) or inline (patch:):
//   - JSON 6902 (a YAML list of operations, with a target): add, remove,
//     replace, move, copy, test, as RFC 6902 says;
//   - strategic merge (a mapping): "$patch: delete" of a whole document, or
//     maps merged key by key (null removes a key). A list in such a patch is a
//     problem: kustomize merges some lists by key (containers by name...) and
//     replaces others, which this model does not know; use JSON 6902 there.
// Not modelled, as they change no field the schema checks care about: images,
// labels, namePrefix/nameSuffix, namespace, replicas. Generators and
// replacements are not modelled at all (a problem if used with patches).
import { readFileSync, existsSync, statSync } from "node:fs";
import { join, resolve, relative } from "node:path";
import { parseAllDocuments } from "yaml";

const kustomizationNames = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
export const kustomizationFile = (dir) => kustomizationNames.map((n) => join(dir, n)).find((f) => existsSync(f));

const parse = (text) => parseAllDocuments(text, { version: "1.1" });
function readDocuments(file) {
    const out = [];
    for (const doc of parse(readFileSync(file, "utf8"))) {
        if (doc.errors.length) throw new Error(`${file}: YAML: ${doc.errors[0].message.split("\n")[0]}`);
        const value = doc.toJS({ maxAliasCount: 100 });
        if (value !== null && value !== undefined) out.push(value);
    }
    return out;
}

export function readKustomization(dir) {
    const file = kustomizationFile(dir);
    if (!file) throw new Error(`${dir}: no kustomization.yaml`);
    const [doc] = readDocuments(file);
    if (!doc?.apiVersion?.startsWith("kustomize.config.k8s.io/")) throw new Error(`${file}: not a kustomization`);
    return doc;
}

// The files a kustomization names as patches (they are not resources).
export const patchFiles = (doc, dir) =>
    (doc.patches ?? []).filter((p) => typeof p?.path === "string").map((p) => resolve(dir, p.path));

const isRemote = (entry) => /^[a-z]+:\/\//.test(entry) || entry.startsWith("github.com/");

// --- JSON 6902 ---

function pointer(path) {
    if (path === "") return [];
    if (!path.startsWith("/")) throw new Error(`path "${path}" must start with /`);
    return path.slice(1).split("/").map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"));
}

function parentOf(doc, path) {
    const segments = pointer(path);
    if (segments.length === 0) throw new Error("the whole document cannot be patched here");
    let node = doc;
    for (const s of segments.slice(0, -1)) {
        node = Array.isArray(node) ? node[Number(s)] : node?.[s];
        if (node === null || typeof node !== "object") throw new Error(`path "${path}": "${s}" does not exist`);
    }
    return [node, segments.at(-1)];
}

function get(doc, path) {
    const [parent, key] = parentOf(doc, path);
    if (Array.isArray(parent) ? !(Number(key) < parent.length) : !(key in parent))
        throw new Error(`path "${path}" does not exist`);
    return parent[Array.isArray(parent) ? Number(key) : key];
}

function add(doc, path, value) {
    const [parent, key] = parentOf(doc, path);
    if (!Array.isArray(parent)) parent[key] = value;
    else if (key === "-") parent.push(value);
    else if (/^\d+$/.test(key) && Number(key) <= parent.length) parent.splice(Number(key), 0, value);
    else throw new Error(`path "${path}": no index ${key} to add at`);
}

function remove(doc, path) {
    const value = get(doc, path);
    const [parent, key] = parentOf(doc, path);
    if (Array.isArray(parent)) parent.splice(Number(key), 1);
    else delete parent[key];
    return value;
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b); // enough for YAML-born values

function applyJson6902(doc, operations) {
    for (const [i, o] of operations.entries()) {
        const what = `operation ${i} (${o?.op} ${o?.path})`;
        try {
            switch (o?.op) {
                case "add": add(doc, o.path, structuredClone(o.value)); break;
                case "remove": remove(doc, o.path); break;
                case "replace": get(doc, o.path); remove(doc, o.path); add(doc, o.path, structuredClone(o.value)); break;
                case "move": add(doc, o.path, remove(doc, o.from)); break;
                case "copy": add(doc, o.path, structuredClone(get(doc, o.from))); break;
                case "test":
                    if (!same(get(doc, o.path), o.value))
                        throw new Error(`found ${JSON.stringify(get(doc, o.path))}, expected ${JSON.stringify(o.value)}`);
                    break;
                default: throw new Error(`unknown op "${o?.op}"`);
            }
        } catch (error) {
            throw new Error(`${what}: ${error.message}`);
        }
    }
}

// --- strategic merge, without lists ---

function findList(value, path = "") {
    if (Array.isArray(value)) return path || "(document)";
    if (value === null || typeof value !== "object") return null;
    for (const [k, v] of Object.entries(value)) {
        const found = findList(v, `${path}.${k}`);
        if (found) return found;
    }
    return null;
}

function merge(target, patch) {
    for (const [key, value] of Object.entries(patch)) {
        if (key.startsWith("$")) throw new Error(`directive "${key}" is not modelled here`);
        if (value === null) delete target[key];
        else if (typeof value === "object" && target[key] && typeof target[key] === "object") merge(target[key], value);
        else target[key] = structuredClone(value);
    }
}

// --- patches and builds ---

const anchored = (pattern) => new RegExp(`^(?:${pattern})$`);
function matches(doc, target) {
    const [group, version] = doc.apiVersion?.includes("/") ? doc.apiVersion.split("/") : ["", doc.apiVersion];
    if (target.labelSelector || target.annotationSelector) throw new Error("label and annotation selectors are not modelled here");
    return [["kind", doc.kind], ["name", doc.metadata?.name], ["group", group], ["version", version],
        ["namespace", doc.metadata?.namespace ?? ""]]
        .every(([field, actual]) => target[field] === undefined || anchored(target[field]).test(actual ?? ""));
}

function applyPatch(docs, entry, dir, where) {
    const source = entry.path !== undefined ? relative(process.cwd(), resolve(dir, entry.path)) : `${where}: an inline patch`;
    const text = entry.path !== undefined ? readFileSync(resolve(dir, entry.path), "utf8") : entry.patch;
    if (typeof text !== "string") throw new Error(`${where}: a patch needs path or patch`);
    const parsed = parse(text).map((d) => {
        if (d.errors.length) throw new Error(`${source}: YAML: ${d.errors[0].message.split("\n")[0]}`);
        return d.toJS();
    }).filter((v) => v !== null && v !== undefined);
    if (parsed.length !== 1) throw new Error(`${source}: one patch per entry (found ${parsed.length} documents)`);
    const patch = parsed[0];
    const json6902 = Array.isArray(patch);
    if (json6902 && !entry.target) throw new Error(`${source}: a JSON 6902 patch needs a target`);
    const target = entry.target ?? { kind: patch.kind, name: patch.metadata?.name };
    if (!json6902) {
        const list = findList(patch);
        if (list) throw new Error(`${source}: strategic merge of a list (${list}) is not modelled here: use a JSON 6902 patch`);
    }
    const hits = docs.filter((d) => matches(d.value, target));
    if (hits.length === 0) throw new Error(`${source}: no resource matches ${JSON.stringify(target)}`);
    for (const hit of hits) {
        const value = structuredClone(hit.value);
        try {
            if (json6902) applyJson6902(value, patch);
            else if (patch.$patch === "delete") {
                docs.splice(docs.indexOf(hit), 1);
                continue;
            } else merge(value, patch);
        } catch (error) {
            throw new Error(`${source} on ${hit.value.kind}/${hit.value.metadata?.name}: ${error.message}`);
        }
        hit.value = value;
        hit.patchedBy.push(source);
    }
}

function accumulate(docs, doc, dir, where, seen) {
    for (const entry of doc.resources ?? []) {
        if (typeof entry !== "string" || isRemote(entry)) continue; // the listing checks report these
        const target = resolve(dir, entry);
        if (existsSync(target) && statSync(target).isDirectory()) docs.push(...build(target, [], seen));
        else docs.push(...readDocuments(target).map((value) => ({ value, patchedBy: [] })));
    }
    for (const entry of doc.components ?? []) {
        const componentDir = resolve(dir, entry);
        accumulate(docs, readKustomization(componentDir), componentDir, relative(process.cwd(), kustomizationFile(componentDir)), seen);
    }
    for (const key of ["configMapGenerator", "secretGenerator", "replacements"])
        if (doc[key] && doc.patches) throw new Error(`${where}: ${key} is not modelled by this check`);
    for (const entry of doc.patches ?? []) applyPatch(docs, entry, dir, where);
}

// The documents `kustomize build dir` would give, each { value, patchedBy: [patch sources] },
// with extraComponents (directories) applied after the kustomization's own.
export function build(dir, extraComponents = [], seen = new Set()) {
    if (seen.has(dir)) throw new Error(`${dir}: a kustomization that includes itself`);
    seen = new Set([...seen, dir]);
    const doc = structuredClone(readKustomization(dir));
    const listed = new Set((doc.components ?? []).map((c) => resolve(dir, c)));
    doc.components = [...(doc.components ?? []), ...extraComponents.filter((c) => !listed.has(c)).map((c) => relative(dir, c))];
    const docs = [];
    accumulate(docs, doc, dir, relative(process.cwd(), kustomizationFile(dir)), seen);
    return docs;
}
