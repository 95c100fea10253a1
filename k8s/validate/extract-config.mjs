// Prints berth's config.json from the ConfigMap in k8s/configmap.yaml (or the
// file given), with replication.secret_file, backup.secret_file, the
// notification endpoints' secret_file and storage.blobs' key files replaced
// (and backup.target moved beside it) when a second argument is given, and
// storage.blobs.endpoint replaced by the third:
// node extract-config.mjs [configmap.yaml] [secret-file] [s3-endpoint]
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const file = process.argv[2] || join(here, "..", "configmap.yaml");
const secretFile = process.argv[3];
const endpoint = process.argv[4];
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
for (const receiver of (secretFile && config.notifications?.endpoints) || [])
    if (receiver.secret_file) receiver.secret_file = secretFile;
const blobs = config.storage?.blobs;
if (secretFile && blobs?.access_key_file) blobs.access_key_file = secretFile;
if (secretFile && blobs?.secret_key_file) blobs.secret_key_file = secretFile;
if (endpoint && blobs?.endpoint) blobs.endpoint = endpoint;
process.stdout.write(JSON.stringify(config, null, 2) + "\n");
