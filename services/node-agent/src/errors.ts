/** The one catalogue of error codes of the node agent (config problems at start; broken invariants). */
export const NodeAgentErrorCode = {
  /** STOWAGE_LOAD_CONCURRENCY / STOWAGE_LOAD_CONCURRENCY_FILE is not valid. */
  LoadConcurrencyInvalid: 'NODE_AGENT_LOAD_CONCURRENCY_INVALID',
  /** STOWAGE_BANDWIDTH_LIMIT is not a byte rate. */
  BandwidthInvalid: 'NODE_AGENT_BANDWIDTH_INVALID',
  /** A required setting is missing (node name, repository key). */
  ConfigMissing: 'NODE_AGENT_CONFIG_MISSING',
} as const;

export type NodeAgentErrorCode = (typeof NodeAgentErrorCode)[keyof typeof NodeAgentErrorCode];

export class NodeAgentError extends Error {
  override readonly name = 'NodeAgentError';
  constructor(
    readonly code: NodeAgentErrorCode,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
  }
}
