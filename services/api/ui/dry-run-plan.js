// The "Plan (dry run)" view of the new-backup form: what POST /v1/backups?dryRun=true answers —
// the ItemBlocks with their pods, hooks per phase (with their source), every volume's decision
// with its reason, estimated bytes per node and the warnings — as one card. Nothing is created.

import { formatBytes, h } from './format.js';

function hookLine(phase, hook) {
  const from = hook.source === 'spec' ? `spec hook ${hook.hookName ?? ''}`.trim() : hook.source;
  return h(
    'li',
    { class: 'plan-hook', 'data-phase': phase, 'data-source': hook.source },
    h('strong', {}, `${phase} `),
    `(${from}) in ${hook.container}: `,
    h('code', {}, hook.command.join(' ')),
    ` onError=${hook.onError}`,
    hook.invalid ? h('span', { class: 'form-error' }, ` cannot run: ${hook.invalid}`) : '',
  );
}

function volumeRow(v) {
  const size =
    v.decision !== 'fs-backup'
      ? '–'
      : v.estimatedBytes === null || v.estimatedBytes === undefined
        ? 'unknown'
        : `~${formatBytes(v.estimatedBytes)} (${v.estimateBasis})`;
  return h(
    'tr',
    { 'data-decision': v.decision },
    h('td', {}, v.pod),
    h('td', {}, v.volume, v.claimName ? h('span', { class: 'muted small' }, ` PVC ${v.claimName}`) : ''),
    h('td', {}, v.decision),
    h('td', { class: 'num' }, size),
    h('td', {}, v.reason ?? ''),
  );
}

function blockSection(block) {
  const pods = block.pods.map((pod) => {
    const hooks = [...pod.hooks.pre.map((x) => hookLine('pre', x)), ...pod.hooks.post.map((x) => hookLine('post', x))];
    return h(
      'li',
      { class: 'plan-pod' },
      h('span', {}, `pod ${pod.namespace}/${pod.name}${pod.node ? ` on ${pod.node}` : ''}`),
      hooks.length ? h('ul', {}, ...hooks) : h('span', { class: 'muted small' }, ' — no hooks'),
    );
  });
  return h(
    'section',
    { class: 'plan-block', 'data-block': block.id },
    h('h4', {}, `Block ${block.id}`, h('span', { class: 'muted small' }, ` ${block.items.length} items`)),
    h('ul', {}, ...pods),
    block.volumes.length
      ? h(
          'div',
          { class: 'table-scroll' },
          h(
            'table',
            { class: 'plan-volumes' },
            h('thead', {}, h('tr', {}, ...['Pod', 'Volume', 'Decision', 'Estimate', 'Reason'].map((t) => h('th', { scope: 'col' }, t)))),
            h('tbody', {}, ...block.volumes.map(volumeRow)),
          ),
        )
      : '',
  );
}

/** The plan as a card (role region, labelled "Plan (dry run)"). */
export function renderDryRunPlan(plan) {
  const card = h('section', { class: 'card dry-run-plan', role: 'region', 'aria-label': 'Plan (dry run)' });
  card.append(
    h('h3', {}, `Plan (dry run) of "${plan.name}"`),
    h('p', { class: 'muted small' }, 'Nothing was created, stored or executed.'),
  );
  if (plan.failedValidation) {
    card.append(h('p', { class: 'form-error' }, `A real run would fail validation: ${plan.failedValidation}`));
    return card;
  }
  const s = plan.summary;
  card.append(
    h(
      'p',
      { class: 'plan-summary' },
      `${s.blocks} ItemBlocks, ${s.items} items, ${s.pods} pods; hooks: ${s.preHooks} pre, ${s.postHooks} post; volumes: ${s.fsBackupVolumes} fs-backup, ${s.skippedVolumes} skipped, ${s.volumeErrors} errors`,
    ),
  );
  const problems = [...plan.warnings.map((w) => ['warning', w]), ...plan.errors.map((e) => ['error', e])];
  if (problems.length)
    card.append(h('ul', { class: 'plan-problems' }, ...problems.map(([k, m]) => h('li', { 'data-level': k }, `${k}: ${m}`))));
  card.append(
    h('h4', {}, 'Estimated bytes per node'),
    h('p', { class: 'muted small' }, `An estimate: ${plan.estimate.basis}`),
    h(
      'table',
      { class: 'plan-estimate' },
      h('thead', {}, h('tr', {}, ...['Node', 'Volumes', 'Estimated', 'Size unknown'].map((t) => h('th', { scope: 'col' }, t)))),
      h(
        'tbody',
        {},
        ...plan.estimate.perNode.map((n) =>
          h(
            'tr',
            {},
            h('td', {}, n.node),
            h('td', { class: 'num' }, String(n.volumes)),
            h('td', { class: 'num' }, n.volumesWithoutEstimate === n.volumes ? 'unknown' : `~${formatBytes(n.estimatedBytes)}`),
            h('td', { class: 'num' }, String(n.volumesWithoutEstimate)),
          ),
        ),
      ),
    ),
  );
  const backupHooks = ['pre', 'post'].flatMap((phase) => (plan.backupHooks?.[phase] ?? []).map((hook) => [phase, hook]));
  if (backupHooks.length)
    card.append(
      h('h4', {}, 'Backup hooks'),
      h(
        'ul',
        { class: 'plan-backup-hooks' },
        ...backupHooks.map(([phase, hook]) =>
          h(
            'li',
            {},
            `${phase} ${hook.name}: ${hook.command.join(' ')} (onError ${hook.onError}) — `,
            hook.failure
              ? h('span', { class: 'form-error' }, `runs nowhere: ${hook.failure}`)
              : hook.targets.map((t) => `${hook.namespace}/${t.pod}:${t.container}`).join(', '),
          ),
        ),
      ),
    );
  const withPods = plan.blocks.filter((b) => b.pods.length > 0);
  const others = plan.blocks.filter((b) => b.pods.length === 0);
  card.append(h('h4', {}, 'ItemBlocks with pods'), ...withPods.map(blockSection));
  if (others.length) {
    card.append(
      h(
        'details',
        {},
        h('summary', {}, `${others.length} blocks without pods (${others.reduce((n, b) => n + b.items.length, 0)} items)`),
        h('ul', {}, ...others.map((b) => h('li', {}, `${b.id}: ${b.items.map((i) => i.key).join(', ')}`))),
      ),
    );
  }
  return card;
}
