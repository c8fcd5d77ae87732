/**
 * The ClusterRole aggregation controller: a ClusterRole with an `aggregationRule` gets, as its rules,
 * the rules of every ClusterRole its selectors match (selectors in order, roles by name, each rule
 * once) — so a CRD's role labelled `rbac.authorization.k8s.io/aggregate-to-edit: "true"` extends
 * `edit` and `admin`. It runs synchronously after each ClusterRole change (the simulator's
 * controllers act as the system: their writes are not authorized), so an apply followed at once by
 * `kubectl auth can-i` sees the aggregated rules.
 */
import type { ClusterState } from '../cluster-state.js';
import { deepEqual, isPlainObject, type KubeObject } from '../kube-object.js';
import { labelSelectorFromObject, matchesLabels } from '../selectors.js';
import { rbacKeys } from './authorizer.js';

export class ClusterRoleAggregator {
  private running = false;
  private again = false;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly state: ClusterState) {}

  install(): void {
    this.unsubscribe = this.state.store.subscribe(rbacKeys.clusterRoles, () => this.reconcile());
    this.reconcile();
  }

  close(): void {
    this.unsubscribe?.();
  }

  /** Brings every aggregated ClusterRole up to date; re-runs if its own writes changed what others aggregate. */
  reconcile(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    try {
      do {
        this.again = false;
        this.pass();
      } while (this.again);
    } finally {
      this.running = false;
    }
  }

  private pass(): void {
    const type = this.state.registry.get('rbac.authorization.k8s.io', 'v1', 'clusterroles')!;
    const roles = [...this.state.store.list(rbacKeys.clusterRoles, undefined)];
    for (const role of roles) {
      const rule = role.aggregationRule;
      if (!isPlainObject(rule) || !Array.isArray(rule.clusterRoleSelectors) || rule.clusterRoleSelectors.length === 0) continue;
      const rules: unknown[] = [];
      for (const selectorObject of rule.clusterRoleSelectors) {
        const selector = labelSelectorFromObject(selectorObject);
        if (!selector) continue;
        for (const other of roles) {
          if (other.metadata.name === role.metadata.name || !matchesLabels(selector, other.metadata.labels)) continue;
          for (const r of Array.isArray(other.rules) ? other.rules : []) if (!rules.some((have) => deepEqual(have, r))) rules.push(r);
        }
      }
      const current = Array.isArray(role.rules) ? role.rules : [];
      if (deepEqual(current, rules)) continue;
      const latest = this.state.store.get(rbacKeys.clusterRoles, '', role.metadata.name!) as KubeObject;
      this.state.update(type, '', role.metadata.name!, { ...latest, rules }, undefined);
    }
  }
}
