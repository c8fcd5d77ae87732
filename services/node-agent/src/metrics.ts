import type { NodeAgentMetrics } from './agent.js';

/** Prometheus text exposition of the agent's metrics (`stowage_<thing>_<unit>`). */
export function renderMetrics(m: NodeAgentMetrics): string {
  const node = `node="${m.node.replace(/["\\\n]/g, '_')}"`;
  const lines = [
    '# HELP stowage_node_agent_pvbs PodVolumeBackups of this node by phase (watch cache).',
    '# TYPE stowage_node_agent_pvbs gauge',
    ...Object.entries(m.pvbsByPhase).map(([phase, count]) => `stowage_node_agent_pvbs{${node},phase="${phase}"} ${count}`),
    '# HELP stowage_node_agent_copies_running Copies running in this agent.',
    '# TYPE stowage_node_agent_copies_running gauge',
    `stowage_node_agent_copies_running{${node}} ${m.running}`,
    '# HELP stowage_node_agent_load_concurrency PVBs allowed in progress at once on this node.',
    '# TYPE stowage_node_agent_load_concurrency gauge',
    `stowage_node_agent_load_concurrency{${node}} ${m.loadConcurrency}`,
    '# HELP stowage_node_agent_copied_bytes_total Bytes read from volumes into the repository.',
    '# TYPE stowage_node_agent_copied_bytes_total counter',
    `stowage_node_agent_copied_bytes_total{${node}} ${m.bytesCopiedTotal}`,
    '# HELP stowage_node_agent_copies_total Copies by outcome (started, completed, failed, canceled).',
    '# TYPE stowage_node_agent_copies_total counter',
    `stowage_node_agent_copies_total{${node},outcome="started"} ${m.copiesStarted}`,
    `stowage_node_agent_copies_total{${node},outcome="completed"} ${m.copiesCompleted}`,
    `stowage_node_agent_copies_total{${node},outcome="failed"} ${m.copiesFailed}`,
    `stowage_node_agent_copies_total{${node},outcome="canceled"} ${m.copiesCanceled}`,
  ];
  return `${lines.join('\n')}\n`;
}
