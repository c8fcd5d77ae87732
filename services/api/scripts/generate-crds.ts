/** Writes the stowage.dev/v1 CRDs into k8s/base from core's schemas: `pnpm --filter @stowage/api gen:crds`. */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderCrdFiles } from '../src/resources/crd-files.js';

const base = fileURLToPath(new URL('../../../k8s/base/', import.meta.url));
for (const { file, text } of renderCrdFiles()) {
  writeFileSync(`${base}${file}`, text);
  console.log(`wrote k8s/base/${file}`);
}
