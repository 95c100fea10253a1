// Checks berth's Kubernetes manifests offline, without a cluster.
//
//   node validate.mjs [DIR]      (DIR defaults to k8s/, this folder's parent)
//
// Every YAML document under DIR (recursively, node_modules skipped) must:
//   - parse, the way Kubernetes parses it (YAML 1.1, as sigs.k8s.io/yaml does);
//   - have an apiVersion and kind that kubernetes-models knows, and pass that
//     model's schema validation (the OpenAPI schema of the Kubernetes API:
//     types, required fields, enums, formats);
//   - use only field names that exist somewhere in the Kubernetes API
//     (the schemas alone allow unknown fields, which `kubectl apply` rejects
//     by default since 1.27 but the API server otherwise drops silently, so a
//     misspelt "readinesProbe" would vanish); free-form maps such as labels,
//     annotations, ConfigMap data and resource quantities are not checked;
//   - or be a kustomize Kustomization or Component: every file it lists must
//     exist, and every YAML file beside it must be listed as a resource or a
//     patch (a manifest that is not listed is never applied by
//     `kubectl apply -k`);
//   - or be a patch a kustomization names: then what the patch makes is
//     checked instead. Every kustomization with patches or components, and
//     every Component applied to the kustomization of a folder above it (the
//     base it is an option of: k8s/bucket/ on k8s/), is built with the model of
//     kustomize in kustomize.mjs, and each document a patch changed must pass
//     the checks above and below. A patch that fails to apply (a "test"
//     operation that fails, a path or target that does not exist) is a problem.
// ConfigMap data keys ending in .json must hold valid JSON.
//
// Container runtime files (every hosts.toml, registries*.conf and
// *berth-agent.conf under DIR: check-config.sh has `berth agent-runtime apply`
// write the agent's on a made-up node and runs this on them) must parse as
// TOML and use only the keys that
// containerd and containers-registries.conf(5) know. When a ConfigMap holds an
// agent configuration (a config.json with an "agent" section), they must also
// point at it: every hosts.toml lists http://<agent listen> as a host without
// "push", and every CRI-O mirror on the agent's address is
// "<listen>/<prefix>" with insecure = true (CRI-O sends no ?ns=, so the
// upstream host must be in the path). Each agent.replicas URL in the
// cluster's DNS must name a headless Service defined under DIR.
//
// Exits 0 when everything passes, 1 with one line per problem otherwise.

import { readdirSync, readFileSync, statSync, existsSync } from "node:fs";
import { join, relative, dirname, resolve, basename } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { parseAllDocuments, LineCounter } from "yaml";
import { parse as parseToml } from "smol-toml";
import { build, kustomizationFile, patchFiles, readKustomization } from "./kustomize.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(process.argv[2] ?? join(here, ".."));
const require = createRequire(import.meta.url);

const problems = [];
const problem = (where, message) => problems.push(`${where}: ${message}`);
let documentCount = 0;

function filesMatching(dir, pattern) {
    const out = [];
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
        if (entry.name === "node_modules" || entry.name.startsWith(".")) continue;
        const path = join(dir, entry.name);
        if (entry.isDirectory()) out.push(...filesMatching(path, pattern));
        else if (pattern.test(entry.name)) out.push(path);
    }
    return out;
}
const yamlFiles = (dir) => filesMatching(dir, /\.ya?ml$/);

// Field names of the Kubernetes API, read from kubernetes-models' compiled
// schema validators (they access each declared property as data.NAME or
// data["NAME"]).
function knownFieldNames() {
    const names = new Set();
    const dirs = [
        join(dirname(require.resolve("kubernetes-models/package.json")), "_schemas"),
        join(dirname(require.resolve("@kubernetes-models/apimachinery/package.json")), "_schemas"),
    ];
    for (const dir of dirs)
        for (const file of readdirSync(dir))
            if (file.endsWith(".js"))
                for (const m of readFileSync(join(dir, file), "utf8").matchAll(/\bdata\.([A-Za-z_$][\w$]*)|\bdata\["([^"]+)"\]/g))
                    names.add(m[1] ?? m[2]);
    names.delete("length");
    if (names.size < 500) throw new Error(`could not read the field names from kubernetes-models (found ${names.size})`);
    return names;
}

// Maps whose keys are the user's, not the API's.
const freeForm = new Set([
    "labels", "annotations", "matchLabels", "nodeSelector", "data", "stringData", "binaryData",
    "limits", "requests", "capacity", "allocatable", "hard", "parameters",
]);

// Unknown field names, as [path segments, dotted path] pairs.
function unknownFields(value, segments, kind, known, out = []) {
    if (Array.isArray(value)) {
        value.forEach((item, i) => unknownFields(item, [...segments, i], kind, known, out));
        return out;
    }
    if (value === null || typeof value !== "object") return out;
    for (const [key, child] of Object.entries(value)) {
        const childSegments = [...segments, key];
        if (!known.has(key)) out.push(childSegments);
        const isServiceSelector = kind === "Service" && childSegments.join(".") === "spec.selector";
        if (!freeForm.has(key) && !isServiceSelector) unknownFields(child, childSegments, kind, known, out);
    }
    return out;
}

const dotted = (segments) =>
    segments.reduce((text, s) => (typeof s === "number" ? `${text}[${s}]` : text ? `${text}.${s}` : s), "") || "(document)";

// The line of the node at segments in a parsed YAML document, or of its
// nearest existing parent.
function lineOf(doc, segments, lineCounter) {
    for (let n = segments.length; n >= 0; n--) {
        const node = n === 0 ? doc.contents : doc.getIn(segments.slice(0, n), true);
        if (node?.range) return lineCounter.linePos(node.range[0]).line;
    }
    return lineCounter.linePos(doc.range?.[0] ?? 0).line;
}

const modelCache = new Map();
async function modelFor(apiVersion, kind) {
    const key = `${apiVersion}/${kind}`;
    if (!modelCache.has(key)) {
        // "v1" is the core group; "apps/v1", "policy/v1", "networking.k8s.io/v1"... are named groups.
        const module = `kubernetes-models/${apiVersion}/${kind}`;
        let model = null;
        if (/^[a-z0-9.]+(\/[a-z0-9]+)?$/.test(apiVersion) && /^[A-Za-z]+$/.test(kind)) {
            try {
                model = (await import(module))[kind] ?? null;
            } catch (error) {
                if (error.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED" && error.code !== "ERR_MODULE_NOT_FOUND") throw error;
            }
        }
        modelCache.set(key, model);
    }
    return modelCache.get(key);
}

const kustomizeKeys = new Set([
    "apiVersion", "kind", "metadata", "resources", "components", "namespace", "namePrefix", "nameSuffix",
    "labels", "commonLabels", "commonAnnotations", "images", "replicas", "patches", "configMapGenerator",
    "secretGenerator", "generatorOptions", "replacements", "buildMetadata", "openapi", "crds",
]);

const patchKeys = new Set(["path", "patch", "target", "options"]);
const targetKeys = new Set(["group", "version", "kind", "name", "namespace", "labelSelector", "annotationSelector"]);

function checkKustomization(doc, file, where) {
    for (const key of Object.keys(doc)) if (!kustomizeKeys.has(key)) problem(where, `unknown kustomize field "${key}"`);
    const dir = dirname(file);
    const listed = new Set();
    for (const entry of [...(doc.resources ?? []), ...(doc.components ?? [])]) {
        if (typeof entry !== "string") {
            problem(where, `resources/components entries must be strings, got ${JSON.stringify(entry)}`);
            continue;
        }
        if (/^[a-z]+:\/\//.test(entry) || entry.startsWith("github.com/")) continue; // remote: not checked offline
        const target = resolve(dir, entry);
        if (!existsSync(target)) problem(where, `lists "${entry}", which does not exist`);
        else if (statSync(target).isDirectory() &&
                 !["kustomization.yaml", "kustomization.yml", "Kustomization"].some((n) => existsSync(join(target, n))))
            problem(where, `lists directory "${entry}", which has no kustomization.yaml`);
        listed.add(target);
    }
    for (const [i, entry] of (doc.patches ?? []).entries()) {
        if (typeof entry?.path !== "string" && typeof entry?.patch !== "string")
            problem(where, `patches[${i}] needs a path or an inline patch`);
        for (const key of Object.keys(entry ?? {}))
            if (!patchKeys.has(key)) problem(where, `patches[${i}]: unknown field "${key}"`);
        for (const key of Object.keys(entry?.target ?? {}))
            if (!targetKeys.has(key)) problem(where, `patches[${i}].target: unknown field "${key}"`);
    }
    for (const target of patchFiles(doc, dir)) {
        if (!existsSync(target)) problem(where, `patches name "${relative(dir, target)}", which does not exist`);
        listed.add(target);
    }
    for (const entry of readdirSync(dir)) {
        if (!/\.ya?ml$/.test(entry) || /^kustomization\.ya?ml$/.test(entry)) continue;
        if (!listed.has(resolve(dir, entry))) problem(where, `does not list ${entry}, so kubectl apply -k would skip it`);
    }
}

// The checks of one Kubernetes object (not a kustomization): its model's
// schema, field names, and the facts the cross-checks below need. at(segments)
// names the place of a field for a message.
async function checkObject(value, label, at) {
    const { apiVersion, kind } = value;
    const Model = await modelFor(apiVersion, kind);
    if (!Model) {
        problem(label, `kubernetes-models has no ${kind} in ${apiVersion}`);
        return;
    }
    try {
        new Model(value).validate();
    } catch (error) {
        const errors = error.errors ?? [];
        if (errors.length === 0) problem(label, error.message);
        for (const e of errors) {
            const segments = e.instancePath.split("/").slice(1)
                .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"))
                .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
            const extra = e.params?.allowedValues ? ` (${e.params.allowedValues.join(", ")})` : "";
            problem(at(segments), `${dotted(segments)}: ${e.message}${extra}`);
        }
    }
    for (const segments of unknownFields(value, [], kind, known))
        problem(at(segments), `unknown field "${dotted(segments)}"`);
    if (kind === "Service" && apiVersion === "v1" && value.spec?.clusterIP === "None" && value.metadata?.name)
        headlessServices.add(value.metadata.name);
    if (kind === "ConfigMap" && apiVersion === "v1")
        for (const [key, text] of Object.entries(value.data ?? {}))
            if (key.endsWith(".json")) {
                let config;
                try {
                    config = JSON.parse(text);
                } catch (error) {
                    problem(at(["data", key]), `data.${key} is not valid JSON: ${error.message}`);
                    continue;
                }
                if (config?.agent && typeof config.agent === "object")
                    agentConfigs.push({ where: at(["data", key]), listen: config.listen, replicas: config.agent.replicas });
            }
}

const known = knownFieldNames();
const files = yamlFiles(root);
// Kustomization files, and the patch files they name: a patch is checked in
// the build it is part of (below), not as a document of its own.
const kustomizationFiles = new Set(files.filter((f) => kustomizationFile(dirname(f)) === f));
const patches = new Set();
for (const file of kustomizationFiles)
    try {
        for (const patch of patchFiles(readKustomization(dirname(file)), dirname(file))) patches.add(patch);
    } catch {
        // reported when the file is checked below
    }
// Seen while checking the YAML, for the runtime files' cross-checks.
const headlessServices = new Set(); // names of Services with clusterIP None
const agentConfigs = []; // { where, listen, replicas }
if (files.length === 0) problem(root, "no YAML files found");

for (const file of files.filter((f) => !patches.has(f))) {
    const name = relative(process.cwd(), file) || file;
    const lineCounter = new LineCounter();
    const docs = parseAllDocuments(readFileSync(file, "utf8"), { version: "1.1", lineCounter, prettyErrors: true });
    for (const doc of docs) {
        const line = lineCounter.linePos(doc.range?.[0] ?? 0).line;
        const where = `${name}:${line}`;
        if (doc.errors.length) {
            for (const error of doc.errors) problem(`${name}`, `YAML: ${error.message.split("\n")[0]}`);
            continue;
        }
        const value = doc.toJS({ maxAliasCount: 100 });
        if (value === null || value === undefined) continue; // an empty document (a trailing ---)
        documentCount++;
        if (typeof value !== "object" || Array.isArray(value)) {
            problem(where, "a document must be a mapping with apiVersion and kind");
            continue;
        }
        const { apiVersion, kind } = value;
        if (typeof apiVersion !== "string" || typeof kind !== "string") {
            problem(where, "apiVersion and kind are required strings");
            continue;
        }
        const label = `${where} ${kind}${value.metadata?.name ? "/" + value.metadata.name : ""}`;
        const at = (segments) => `${name}:${lineOf(doc, segments, lineCounter)} ${kind}${value.metadata?.name ? "/" + value.metadata.name : ""}`;
        if (apiVersion.startsWith("kustomize.config.k8s.io/")) {
            if (!["Kustomization", "Component"].includes(kind)) problem(label, `unknown kustomize kind ${kind}`);
            else checkKustomization(value, file, label);
            continue;
        }
        await checkObject(value, label, at);
    }
}

// Overlays: what each kustomization with patches or components builds, and
// each Component applied to the kustomization of the folder above it (the
// base it is an option of), through the model in kustomize.mjs. Documents a
// patch changed are checked like files; the others were checked as files.
const builds = [];
for (const file of files.filter((f) => kustomizationFiles.has(f))) {
    const dir = dirname(file);
    let doc;
    try {
        doc = readKustomization(dir);
    } catch {
        continue; // reported above
    }
    if (doc.kind === "Kustomization" && (doc.patches || doc.components)) builds.push([dir, []]);
    if (doc.kind === "Component") {
        let base = dir;
        do base = dirname(base); while (base !== root && base !== dirname(base) && !kustomizationFile(base));
        let listed;
        try {
            listed = (readKustomization(base).components ?? []).some((c) => resolve(base, c) === dir);
        } catch {
            problem(relative(process.cwd(), file), "a Component with no kustomization in a folder above it to apply it to");
            continue;
        }
        if (!listed) builds.push([base, [dir]]); // when the base lists it, its own build covers it
    }
}
let builtCount = 0;
for (const [dir, components] of builds) {
    const name = relative(process.cwd(), dir) || ".";
    const what = components.length ? `${name} with ${components.map((c) => relative(dir, c)).join(", ")}` : name;
    let docs;
    try {
        docs = build(dir, components);
    } catch (error) {
        problem(`build of ${what}`, error.message);
        continue;
    }
    for (const { value, patchedBy } of docs.filter((d) => d.patchedBy.length)) {
        builtCount++;
        const label = `build of ${what}: ${value.kind}/${value.metadata?.name} (patched by ${patchedBy.join(", ")})`;
        await checkObject(value, label, () => label);
    }
}

// --- The node agent's runtime files and cross-checks ---

// hosts.toml keys, from containerd's docs/hosts.md.
const hostKeys = new Set(["capabilities", "ca", "client", "skip_verify", "header", "override_path", "dial_timeout", "proxy"]);
const hostsTopKeys = new Set([...hostKeys, "server", "host"]);
const capabilities = new Set(["pull", "resolve", "push"]);
// registries.conf keys, from containers-registries.conf(5) (version 2 format).
const registriesTopKeys = new Set(["unqualified-search-registries", "short-name-mode", "registry", "aliases",
    "credential-helpers", "additional-layer-store-auth-helper"]);
const registryKeys = new Set(["prefix", "location", "insecure", "blocked", "mirror-by-digest-only", "pull-from-mirror", "mirror"]);
const mirrorKeys = new Set(["location", "insecure", "pull-from-mirror"]);
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

const agentListens = [...new Set(agentConfigs.map((a) => a.listen).filter((l) => typeof l === "string"))];
for (const agent of agentConfigs) {
    if (typeof agent.listen !== "string") problem(agent.where, "the agent configuration has no listen address");
    if (!Array.isArray(agent.replicas) || agent.replicas.length === 0) {
        problem(agent.where, "agent.replicas must list at least one base URL");
        continue;
    }
    for (const url of agent.replicas) {
        let host;
        try {
            host = new URL(url).hostname;
        } catch {
            problem(agent.where, `agent.replicas: "${url}" is not a URL`);
            continue;
        }
        const service = host.split(".")[0];
        if (host.includes(".svc") && !headlessServices.has(service))
            problem(agent.where, `agent.replicas: "${url}" names the Service "${service}", but no headless Service by that name is defined under ${root}`);
    }
}

const runtimeFiles = filesMatching(root, /^(hosts\.toml|registries.*\.conf|.*berth-agent\.conf)$/);
files.push(...runtimeFiles);
for (const file of runtimeFiles) {
    const name = relative(process.cwd(), file) || file;
    let doc;
    try {
        doc = parseToml(readFileSync(file, "utf8"));
    } catch (error) {
        problem(error.line ? `${name}:${error.line}` : name, `TOML: ${error.message.split("\n")[0]}`);
        continue;
    }
    if (basename(file) === "hosts.toml") {
        for (const key of Object.keys(doc)) if (!hostsTopKeys.has(key)) problem(name, `unknown hosts.toml key "${key}"`);
        if (doc.server !== undefined && !/^https?:\/\/[^/]+/.test(doc.server)) problem(name, `server "${doc.server}" must be an http:// or https:// URL`);
        const hosts = isObject(doc.host) ? doc.host : {};
        if (Object.keys(hosts).length === 0) problem(name, "no [host.\"...\"] section: containerd would only use the server");
        for (const [url, host] of Object.entries(hosts)) {
            if (!/^https?:\/\/[^/]+/.test(url)) problem(name, `host "${url}" must be an http:// or https:// URL`);
            if (!isObject(host)) {
                problem(name, `host "${url}" must be a table`);
                continue;
            }
            for (const key of Object.keys(host)) if (!hostKeys.has(key)) problem(name, `host "${url}": unknown key "${key}"`);
            for (const c of host.capabilities ?? []) if (!capabilities.has(c)) problem(name, `host "${url}": unknown capability "${c}"`);
            if ((host.capabilities ?? []).includes("push") && agentListens.some((l) => url === `http://${l}`))
                problem(name, `host "${url}": the agent refuses pushes, give it "pull" and "resolve" only`);
        }
        if (agentListens.length && !agentListens.some((l) => hosts[`http://${l}`]))
            problem(name, `does not list the agent (${agentListens.map((l) => `[host."http://${l}"]`).join(" or ")})`);
    } else {
        for (const key of Object.keys(doc)) if (!registriesTopKeys.has(key)) problem(name, `unknown registries.conf key "${key}"`);
        const registries = Array.isArray(doc.registry) ? doc.registry : [];
        if (registries.length === 0) problem(name, "no [[registry]] table");
        for (const [i, registry] of registries.entries()) {
            if (!isObject(registry)) {
                problem(name, `registry[${i}] must be a table`);
                continue;
            }
            const label = `registry[${i}]${registry.prefix ? ` (${registry.prefix})` : ""}`;
            for (const key of Object.keys(registry)) if (!registryKeys.has(key)) problem(name, `${label}: unknown key "${key}"`);
            if (!registry.prefix && !registry.location) problem(name, `${label}: needs prefix or location`);
            const prefix = registry.prefix ?? registry.location;
            if (registry.mirror !== undefined && !Array.isArray(registry.mirror)) {
                problem(name, `${label}: mirrors are [[registry.mirror]] tables (an array), not [registry.mirror]`);
                continue;
            }
            for (const [j, mirror] of (registry.mirror ?? []).entries()) {
                for (const key of Object.keys(mirror)) if (!mirrorKeys.has(key)) problem(name, `${label} mirror[${j}]: unknown key "${key}"`);
                if (typeof mirror.location !== "string") {
                    problem(name, `${label} mirror[${j}]: needs a location`);
                    continue;
                }
                const listen = agentListens.find((l) => mirror.location === l || mirror.location.startsWith(`${l}/`));
                if (listen === undefined) continue;
                // CRI-O sends no ?ns=: the upstream host must be the first path component.
                if (mirror.location !== `${listen}/${prefix}`)
                    problem(name, `${label} mirror[${j}]: location "${mirror.location}" should be "${listen}/${prefix}" (CRI-O sends no ns=, so the agent needs the upstream host in the path)`);
                if (mirror.insecure !== true) problem(name, `${label} mirror[${j}]: the agent speaks plain HTTP on loopback: set insecure = true`);
            }
        }
    }
}

if (problems.length) {
    for (const line of problems) console.error(`FAIL ${line}`);
    console.error(`${problems.length} problem(s) in ${files.length} file(s) under ${root}`);
    process.exit(1);
}
console.log(`ok: ${documentCount} document(s) and ${runtimeFiles.length} runtime file(s) in ${files.length} file(s) under ${root} are valid, ` +
    `and ${builtCount} patched document(s) in ${builds.length} build(s)`);
