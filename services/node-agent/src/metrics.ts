import type { NodeAgentMetrics } from './agent.js';

/** Prometheus text exposition of the agent's metrics (`stowage_<thing>_<unit>`). */
export function renderMetrics(m: NodeAgentMetrics): string {
  const node = `node="${m.node.replace(/["\\\n]/g, '_')}"`;
  const lines = [
    '# HELP stowage_node_agent_pvbs PodVolumeBackups of this node by phase (watch cache).',
    '# TYPE stowage_node_agent_pvbs gauge',
    ...Object.entries(m.pvbsByPhase).map(([phase, count]) => `stowage_node_agent_pvbs{${node},phase="${phase}"} ${count}`),
    '# HELP stowage_node_agent_copies_running Copies and restores running in this agent.',
    '# TYPE stowage_node_agent_copies_running gauge',
    `stowage_node_agent_copies_running{${node}} ${m.running}`,
    '# HELP stowage_node_agent_load_concurrency PVBs and PVRs (together) allowed in progress at once on this node.',
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
    '# HELP stowage_node_agent_pvrs PodVolumeRestores this node runs, ran or may start, by phase (watch cache).',
    '# TYPE stowage_node_agent_pvrs gauge',
    ...Object.entries(m.pvrsByPhase).map(([phase, count]) => `stowage_node_agent_pvrs{${node},phase="${phase}"} ${count}`),
    '# HELP stowage_node_agent_restored_bytes_total Bytes restored from the repository into volumes.',
    '# TYPE stowage_node_agent_restored_bytes_total counter',
    `stowage_node_agent_restored_bytes_total{${node}} ${m.bytesRestoredTotal}`,
    '# HELP stowage_node_agent_restores_total Volume restores by outcome (started, completed, failed, canceled).',
    '# TYPE stowage_node_agent_restores_total counter',
    `stowage_node_agent_restores_total{${node},outcome="started"} ${m.restoresStarted}`,
    `stowage_node_agent_restores_total{${node},outcome="completed"} ${m.restoresCompleted}`,
    `stowage_node_agent_restores_total{${node},outcome="failed"} ${m.restoresFailed}`,
    `stowage_node_agent_restores_total{${node},outcome="canceled"} ${m.restoresCanceled}`,
  ];
  return `${lines.join('\n')}\n`;
}
