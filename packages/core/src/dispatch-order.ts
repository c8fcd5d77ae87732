/**
 * The order in which a backup's blocks are handed to the workers.
 *
 * Volume backups are pinned to their pod's node, and a node agent copies only so many at once, so
 * a node whose blocks all come late in the plan sits idle while others queue up: in plan order the
 * last of 40 nodes got its first PVB about twice as late as it needed to. Blocks with volume
 * backups therefore come first, interleaved by node — one block per node per round, the nodes with
 * the most volume backups first in every round — so the first N blocks reach N different nodes and
 * every agent starts copying as early as the block slots allow. Blocks without volume backups keep
 * their order and follow (they only need a block slot, and run while the volumes copy).
 *
 * Deterministic and stable: the same input gives the same order; blocks of one node keep their
 * relative order.
 */
export function dispatchOrder<T>(blocks: readonly T[], pvbNodesOf: (block: T) => readonly string[]): T[] {
  const byNode = new Map<string, T[]>();
  const pvbsPerNode = new Map<string, number>();
  const withoutPvbs: T[] = [];
  for (const block of blocks) {
    const node = primaryNode(pvbNodesOf(block), pvbsPerNode);
    if (node === undefined) {
      withoutPvbs.push(block);
      continue;
    }
    const list = byNode.get(node);
    if (list) list.push(block);
    else byNode.set(node, [block]);
  }
  const nodes = [...byNode.keys()].sort((a, b) => (pvbsPerNode.get(b) ?? 0) - (pvbsPerNode.get(a) ?? 0) || (a < b ? -1 : a > b ? 1 : 0));
  const ordered: T[] = [];
  for (let round = 0; ordered.length < blocks.length - withoutPvbs.length; round++) {
    for (const node of nodes) {
      const block = byNode.get(node)?.[round];
      if (block !== undefined) ordered.push(block);
    }
  }
  for (const block of withoutPvbs) ordered.push(block);
  return ordered;
}

/** The node with most of the block's volume backups (ties: the first by name); counts them per node as it goes. */
function primaryNode(nodes: readonly string[], pvbsPerNode: Map<string, number>): string | undefined {
  if (nodes.length === 0) return undefined;
  const inBlock = new Map<string, number>();
  for (const node of nodes) {
    inBlock.set(node, (inBlock.get(node) ?? 0) + 1);
    pvbsPerNode.set(node, (pvbsPerNode.get(node) ?? 0) + 1);
  }
  let best: string | undefined;
  let bestCount = 0;
  for (const [node, count] of inBlock) {
    if (count > bestCount || (count === bestCount && best !== undefined && node < best)) {
      best = node;
      bestCount = count;
    }
  }
  return best;
}
