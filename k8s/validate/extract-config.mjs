// Prints berth's config.json from the ConfigMap in k8s/configmap.yaml (or the
// file given), with replication.secret_file, backup.secret_file and the
// notification endpoints' secret_file replaced
// (and backup.target moved beside it) when a second argument is given:
// node extract-config.mjs [configmap.yaml] [secret-file]
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const file = process.argv[2] || join(here, "..", "configmap.yaml");
const secretFile = process.argv[3];
const map = parseAllDocuments(readFileSync(file, "utf8"), { version: "1.1" })
    .map((d) => d.toJS())
    .find((d) => d?.kind === "ConfigMap" && d.data?.["config.json"] !== undefined);
if (!map) {
    console.error(`${file}: no ConfigMap with a config.json key`);
    process.exit(1);
}
const config = JSON.parse(map.data["config.json"]);
if (secretFile && config.replication) config.replication.secret_file = secretFile;
if (secretFile && config.backup) {
    config.backup.secret_file = secretFile;
    config.backup.target = join(dirname(secretFile), "backups");
}
for (const endpoint of (secretFile && config.notifications?.endpoints) || [])
    if (endpoint.secret_file) endpoint.secret_file = secretFile;
process.stdout.write(JSON.stringify(config, null, 2) + "\n");
