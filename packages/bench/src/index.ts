export { type BenchOptions, type FsScenario, type OrchestrationScenario, parseBenchArgs, SCENARIOS } from './bench-options.js';
export { type Distribution, commandStatsDelta, distribution, nodeAgentBound, parseCommandStats, percentile } from './stats.js';
export { layoutTimeline, packRows, renderTimelineSvg, type TimelineInput, tickStepMs } from './timeline-svg.js';
