#!/usr/bin/env node
// Validates Kubernetes manifests (a JSON array, `anneal kubernetes render --format json`) against the
// official Kubernetes API schemas, as packaged by kubernetes-models (npm, under tools/npm). Prints one
// line per manifest; exits 1 naming the manifest and the failing path when one does not validate.
//   node kubernetes_validate.mjs FILE.json
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const models = join(dirname(fileURLToPath(import.meta.url)), "../../tools/npm/node_modules/kubernetes-models");
// apiVersion/kind -> the model's module (its class has the kind's name)
const modulePath = (apiVersion, kind) => {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  return join(models, group === "" ? version : `${group}/${version}`, `${kind}.js`);
};
const docs = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const doc of docs) {
  const name = `${doc.kind}/${doc.metadata?.name}`;
  try {
    const mod = await import(pathToFileURL(modulePath(doc.apiVersion, doc.kind)).href);
    new mod[doc.kind](doc).validate();
    console.log(`valid: ${name} (${doc.apiVersion})`);
  } catch (e) {
    failed++;
    console.log(`invalid: ${name}: ${String(e.message || e).split("\n")[0]}`);
  }
}
process.exit(failed ? 1 : 0);
