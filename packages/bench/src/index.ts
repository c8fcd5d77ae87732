export { type BenchOptions, type FsScenario, type OrchestrationScenario, parseBenchArgs, SCENARIOS } from './bench-options.js';
export { commandStatsDelta, type Distribution, distribution, nodeAgentBound, parseCommandStats, percentile } from './stats.js';
export { layoutTimeline, packRows, renderTimelineSvg, type TimelineInput, tickStepMs } from './timeline-svg.js';
