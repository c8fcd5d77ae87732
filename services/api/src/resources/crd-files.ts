import { stringify } from 'yaml';
import { CRD_FILE_HEADER, stowageCrds } from './crds.js';

/** Each CRD file under k8s/base as the generator writes it (name → text). */
export function renderCrdFiles(): Array<{ file: string; text: string }> {
  return stowageCrds().map(({ file, crd }) => ({ file, text: `${CRD_FILE_HEADER}\n${stringify(crd, { lineWidth: 0 })}` }));
}
