import { z } from 'zod';

/*
 * Wire pieces every resource of the API shares (backups, restores, schedules): timestamps, names in
 * URLs, and paging — one definition, so a limit or a message changes in one place.
 */

export const isoTime = z.string().describe('RFC 3339 timestamp');

/** When a backup or restore was created, started and completed. */
/** Where a run belongs: a namespaced one acts on its namespace only (absent: cluster-wide). */
export const runScope = {
  namespace: z
    .string()
    .optional()
    .describe(
      'The namespace a namespaced run acts on (RBAC: backups/restores in it); absent: cluster-wide (clusterbackups/clusterrestores)',
    ),
};

export const runTimes = {
  createdAt: isoTime,
  startedAt: isoTime.optional(),
  completedAt: isoTime.optional(),
};

/** How many volume operations (PVBs, PVRs) are in each phase, and in all. */
export function phaseCounts<P extends string>(phases: readonly P[]) {
  const perPhase = Object.fromEntries(phases.map((phase) => [phase, z.number().int()])) as Record<P, z.ZodNumber>;
  return z.object({ total: z.number().int(), ...perPhase });
}

/** A volume operation's (PVB's, PVR's) progress as its status reports it. */
export const volumeOperationStatus = {
  phase: z.string(),
  totalBytes: z.number().optional(),
  bytesDone: z.number().optional(),
  message: z.string().optional(),
  startTimestamp: z.string().optional(),
  completionTimestamp: z.string().optional(),
};

/** What a backup or restore asked of object storage (README "What a backup costs in requests"). */
export const storageCostSchema = z
  .object({
    requests: z
      .object({
        put: z.number().int().describe('PutObject, CopyObject and each request of a multipart upload'),
        get: z.number().int().describe('GetObject, whole or a range'),
        list: z.number().int().describe('ListObjectsV2 pages'),
        head: z.number().int().describe('HeadObject, HeadBucket'),
        delete: z.number().int().describe('DeleteObject, DeleteObjects batches, AbortMultipartUpload'),
      })
      .describe('Requests by operation, as object storage bills them; retried attempts included'),
    bytesWritten: z.number().int().describe('Object bytes sent to the store'),
    bytesRead: z.number().int().describe('Object bytes read out of the store'),
  })
  .describe(
    'What the run asked of object storage: its jobs, its finalize and its node agents (PVBs, PVRs), each counting its own requests',
  );

/** A backup's or restore's name in a URL: a DNS-1123 label (anything else can never name one). */
export function dns1123NameParam(kind: 'backup' | 'restore') {
  const Kind = kind === 'backup' ? 'Backup' : 'Restore';
  return z
    .string()
    .max(63, `a ${kind} name is at most 63 characters`)
    .regex(
      /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
      `a ${kind} name is a DNS-1123 label: lowercase letters, digits and "-", alphanumeric at both ends`,
    )
    .describe(`${Kind} name (DNS-1123 label)`);
}

const limit = z.coerce.number().int('limit must be a whole number').min(1, 'limit must be at least 1').max(1000, 'limit is at most 1000');
const offsetCursor = z.string().regex(/^\d{1,15}$/, 'cursor must be a value returned as nextCursor');
/** A run list's cursor names the run a page ended with (`<createdAt>.<name>`; RunState.listRuns). */
const runCursor = z.string().regex(/^\d{1,15}\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'cursor must be a value returned as nextCursor');

/**
 * `?limit=&cursor=` with the given default page size, plus the route's own filters. `runs`: a list
 * of backups or restores, which change while a client pages (its cursor is a place, not an offset).
 */
export function pageQuery<S extends z.ZodRawShape = Record<never, never>>(
  defaultLimit: number,
  filters?: S,
  opts: { runs?: boolean } = {},
) {
  const cursor = opts.runs ? runCursor : offsetCursor;
  return z.object({ ...(filters as S), limit: limit.default(defaultLimit), cursor: cursor.optional() });
}

/** A page of `item`s; `nextCursor` absent on the last page. */
export function pageOf<T extends z.ZodType>(item: T) {
  return z.object({
    items: z.array(item),
    nextCursor: z.string().optional().describe('Pass as ?cursor= for the next page; absent on the last page'),
  });
}
