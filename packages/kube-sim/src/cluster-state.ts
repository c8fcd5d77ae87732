/**
 * API semantics over the raw store: create/get/list/update/patch/delete with resourceVersion
 * checks, the status subresource, generateName, finalizers, CRD registration, schema validation
 * and watch subscriptions. The HTTP router and the fixture loader both go through this class.
 */
import { randomUUID } from 'node:crypto';
import { ApiError, alreadyExists, apiError, conflict, invalid, notFound, type StatusCause } from './api-status.js';
import { defaultRbacObject, validateRbacObject } from './auth/rbac-validation.js';
import { deepEqual, isPlainObject, type KubeObject, type ObjectMeta } from './kube-object.js';
import { type ChangeEvent, ObjectStore } from './object-store.js';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch } from './patches.js';
import { apiVersionOf, ResourceRegistry, type ResourceType, storageKey } from './resource-registry.js';
import { validateCustomResource } from './schema-validator.js';
import { hasSelector, matchesFilter, type ObjectFilter } from './selectors.js';
import { allocateServiceAddresses } from './service-allocation.js';
import type { PrinterColumn } from './table.js';
import { servedAs } from './watch-line.js';

export type PatchType = 'merge' | 'json' | 'strategic' | 'apply';

export interface WriteOptions {
  dryRun?: boolean;
  /**
   * `fieldValidation` of the request: `Strict` rejects a field a custom resource's schema does not
   * know (instead of pruning it), `Warn` prunes it and adds a warning to `warnings`. Built-in kinds
   * have no schema here, so nothing is checked for them.
   */
  fieldValidation?: 'Ignore' | 'Warn' | 'Strict';
  /** Collects warnings for the response's `Warning` headers. */
  warnings?: string[];
  /** Fixture loading: keep the given status even on create of a kind with a status subresource. */
  keepStatus?: boolean;
  /**
   * Admission (escalation checks, Pod Security): sees the object as it would be stored (after
   * defaults, patches and validation; before dry-run stops) and its previous state on updates;
   * throws an ApiError to refuse the write, may add to `warnings`.
   */
  admit?: (type: ResourceType, object: KubeObject, previous: KubeObject | undefined, subresource: 'status' | undefined) => void;
}

export interface ListOptions {
  filter: ObjectFilter;
  limit?: number;
  continueToken?: string;
}

export interface ListResult {
  items: KubeObject[];
  resourceVersion: string;
  continueToken?: string;
  remainingItemCount?: number;
}

export type WatchEvent = { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: KubeObject } | { type: 'ERROR'; object: unknown };

const crdKey = 'customresourcedefinitions.apiextensions.k8s.io';
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const generateSuffixAlphabet = 'bcdfghjklmnpqrstvwxz2456789';

function randomSuffix(): string {
  let out = '';
  for (let i = 0; i < 5; i++) out += generateSuffixAlphabet[Math.floor(Math.random() * generateSuffixAlphabet.length)];
  return out;
}

export interface ClusterStateOptions {
  historyLimit?: number;
  now?: () => Date;
}

/** Reactions to writes, the simulator's stand-ins for controllers (scheduler, provisioner, kubelet). */
export interface ClusterHooks {
  onPodCreated?: (pod: KubeObject) => void;
  /** Every object created through the API (not fixture loading), after it is stored. */
  onCreated?: (type: ResourceType, object: KubeObject) => void;
  /** Every stored change of an existing object (API writes and the controllers' own), after it is stored. */
  onUpdated?: (type: ResourceType, object: KubeObject, previous: KubeObject) => void;
  /** Every object removed from the store (a delete, or its namespace's), after it is gone. */
  onDeleted?: (type: ResourceType, object: KubeObject) => void;
  /**
   * Replaces the default scheduling and start-up of a pod created through the API (the default puts
   * it on nodes round-robin and starts it Running): see controllers.ts.
   */
  preparePod?: (pod: KubeObject) => KubeObject;
}

export class ClusterState {
  readonly registry = new ResourceRegistry();
  readonly store: ObjectStore;
  private readonly now: () => Date;
  hooks: ClusterHooks = {};
  private scheduleCounter = 0;
  /**
   * When true, a CRD created through the API is stored without the Established condition and its
   * resources are not served until `establishCrd` is called (a controller does, shortly after).
   */
  deferCrdEstablishment = false;

  constructor(options: ClusterStateOptions = {}) {
    this.store = new ObjectStore(options.historyLimit ?? 10_000);
    this.now = options.now ?? (() => new Date());
  }

  private timestamp(): string {
    // Kubernetes timestamps have second precision.
    return this.now()
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z');
  }

  private withServedVersion(type: ResourceType, object: KubeObject): KubeObject {
    return servedAs(object, apiVersionOf(type));
  }

  get(type: ResourceType, namespace: string, name: string): KubeObject {
    const object = this.store.get(storageKey(type), type.namespaced ? namespace : '', name);
    if (!object) throw notFound(type.plural, type.group, name);
    return this.withServedVersion(type, object);
  }

  tryGet(type: ResourceType, namespace: string, name: string): KubeObject | undefined {
    return this.store.get(storageKey(type), type.namespaced ? namespace : '', name);
  }

  list(type: ResourceType, namespace: string | undefined, options: ListOptions): ListResult {
    let afterKey: string | undefined;
    // Every page of one list shows the state at its first page's resourceVersion, as the API server
    // does: otherwise an object created between pages, sorting before the cursor, is in no page
    // although the list's resourceVersion (where a watch starts) is past its creation.
    let snapshotRv = this.store.resourceVersion;
    if (options.continueToken) ({ start: afterKey, rv: snapshotRv } = decodeContinue(options.continueToken));
    const limit = options.limit && options.limit > 0 ? options.limit : undefined;
    const items: KubeObject[] = [];
    let lastKey: string | undefined;
    let more = false;
    const objects = this.store.listAt(storageKey(type), type.namespaced ? namespace : undefined, snapshotRv, afterKey);
    if (!objects) {
      throw apiError(
        'Expired',
        `The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter. (resourceVersion ${snapshotRv} is older than ${this.store.oldestResumableRv})`,
      );
    }
    for (const object of objects) {
      if (!matchesFilter(options.filter, object)) continue;
      if (limit !== undefined && items.length >= limit) {
        more = true;
        break;
      }
      items.push(this.withServedVersion(type, object));
      lastKey = `${object.metadata.namespace ?? ''}/${object.metadata.name}`;
    }
    const result: ListResult = { items, resourceVersion: String(snapshotRv) };
    if (more && lastKey !== undefined) {
      result.continueToken = encodeContinue(lastKey, snapshotRv);
      // As the API server: counted (not walked) for a list without a selector; unknown, so unset, with one.
      const remaining = hasSelector(options.filter)
        ? undefined
        : this.store.countAt(storageKey(type), type.namespaced ? namespace : undefined, snapshotRv, lastKey);
      if (remaining !== undefined) result.remainingItemCount = remaining;
    }
    return result;
  }

  private checkNamespace(type: ResourceType, namespace: string): void {
    if (!type.namespaced) return;
    if (!this.store.get('namespaces', '', namespace)) throw notFound('namespaces', '', namespace);
  }

  private validateMeta(type: ResourceType, meta: ObjectMeta): StatusCause[] {
    const causes: StatusCause[] = [];
    const name = meta.name ?? '';
    const pattern = type.kind === 'Namespace' ? dnsLabel : dnsSubdomain;
    const max = type.kind === 'Namespace' ? 63 : 253;
    if (name === '')
      causes.push({ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' });
    else if (type.group === 'rbac.authorization.k8s.io') {
      // RBAC names are path segments (`system:basic-user`), not DNS names.
      if (name === '.' || name === '..' || name.includes('/') || name.includes('%'))
        causes.push({
          reason: 'FieldValueInvalid',
          field: 'metadata.name',
          message: `Invalid value: ${JSON.stringify(name)}: may not be '.' or '..' and may not contain '/' or '%'`,
        });
    } else if (!pattern.test(name) || name.length > max) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: 'metadata.name',
        message: `Invalid value: "${name}": a lowercase RFC 1123 ${type.kind === 'Namespace' ? 'label' : 'subdomain'} must consist of lower case alphanumeric characters, '-' or '.'`,
      });
    }
    for (const [field, map] of [
      ['metadata.labels', meta.labels],
      ['metadata.annotations', meta.annotations],
    ] as const) {
      if (map === undefined) continue;
      if (!isPlainObject(map)) causes.push({ reason: 'FieldValueTypeInvalid', field, message: 'must be a map of strings' });
      else
        for (const [k, v] of Object.entries(map)) {
          if (typeof v !== 'string')
            causes.push({ reason: 'FieldValueTypeInvalid', field: `${field}.${k}`, message: 'Invalid value: must be a string' });
        }
    }
    return causes;
  }

  /** Validates the body shape common to create and update, and fills apiVersion/kind from the endpoint. */
  private normaliseBody(type: ResourceType, namespace: string, body: unknown): KubeObject {
    if (!isPlainObject(body)) throw apiError('BadRequest', 'the request body must be a JSON object');
    const apiVersion = apiVersionOf(type);
    if (body.apiVersion !== undefined && body.apiVersion !== apiVersion) {
      // Other served versions of the same group are accepted (storage is shared).
      const sameGroup = typeof body.apiVersion === 'string' && type.group !== '' && body.apiVersion.startsWith(`${type.group}/`);
      if (!sameGroup) {
        throw apiError(
          'BadRequest',
          `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${apiVersion})`,
        );
      }
    }
    if (body.kind !== undefined && body.kind !== type.kind) {
      throw apiError('BadRequest', `the kind in the data (${String(body.kind)}) does not match the expected kind (${type.kind})`);
    }
    if (body.metadata !== undefined && !isPlainObject(body.metadata)) {
      throw apiError('BadRequest', 'metadata must be an object');
    }
    const metadata: ObjectMeta = { ...((body.metadata as ObjectMeta | undefined) ?? {}) };
    if (type.namespaced) {
      if (metadata.namespace !== undefined && metadata.namespace !== '' && metadata.namespace !== namespace) {
        throw apiError('BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
      }
      metadata.namespace = namespace;
    } else {
      delete metadata.namespace;
    }
    return { ...body, apiVersion, kind: type.kind, metadata };
  }

  private validateContent(type: ResourceType, given: KubeObject, options: WriteOptions = {}, previous?: KubeObject): KubeObject {
    const isRbac = type.group === 'rbac.authorization.k8s.io';
    const object = isRbac ? defaultRbacObject(type.kind, given) : given;
    const causes = this.validateMeta(type, object.metadata);
    if (isRbac) causes.push(...validateRbacObject(type.kind, object, previous));
    let result = object;
    if (type.schema) {
      const validated = validateCustomResource(type.schema, object);
      causes.push(...validated.causes);
      result = validated.value as KubeObject;
      const unknown = validated.unknownFields;
      if (unknown.length > 0 && options.fieldValidation === 'Strict') {
        const qualifiedKind = type.group ? `${type.kind}.${type.group}` : type.kind;
        const fields = unknown.map((f) => `unknown field "${f}"`).join(', ');
        throw apiError(
          'BadRequest',
          `${qualifiedKind} in version "${type.version}" cannot be handled as a ${type.kind}: strict decoding error: ${fields}`,
        );
      }
      if (unknown.length > 0 && options.fieldValidation === 'Warn') options.warnings?.push(...unknown.map((f) => `unknown field "${f}"`));
    }
    if (type.kind === 'CustomResourceDefinition') causes.push(...validateCrd(object));
    if (causes.length > 0) throw invalid(type.kind, type.group, object.metadata.name ?? '', causes);
    return result;
  }

  create(type: ResourceType, namespace: string, body: unknown, options: WriteOptions = {}): KubeObject {
    let object = this.normaliseBody(type, namespace, body);
    const meta = object.metadata;
    if (!meta.name && meta.generateName) {
      meta.name = `${meta.generateName}${randomSuffix()}`;
    }
    this.checkNamespace(type, namespace);
    if (type.hasStatus && type.schema && !options.keepStatus) delete object.status;
    object = this.validateContent(type, object, options);
    options.admit?.(type, object, undefined, undefined);
    const key = storageKey(type);
    const objectNamespace = type.namespaced ? namespace : '';
    if (this.store.get(key, objectNamespace, object.metadata.name!)) throw alreadyExists(type.plural, type.group, object.metadata.name!);
    const metadata: ObjectMeta = {
      ...object.metadata,
      uid: object.metadata.uid && options.keepStatus ? object.metadata.uid : randomUUID(),
    };
    metadata.creationTimestamp =
      options.keepStatus && object.metadata.creationTimestamp ? object.metadata.creationTimestamp : this.timestamp();
    metadata.generation = 1;
    delete metadata.deletionTimestamp;
    delete metadata.resourceVersion;
    delete metadata.managedFields;
    let stored: KubeObject = { ...object, metadata };
    stored = this.prepareForCreate(type, stored, options.keepStatus === true);
    if (options.dryRun) return { ...stored, metadata: { ...stored.metadata, resourceVersion: String(this.store.resourceVersion) } };
    stored.metadata.resourceVersion = String(this.store.nextRv());
    this.store.put(key, stored);
    this.afterWrite(type, stored, undefined);
    if (!options.keepStatus) this.hooks.onCreated?.(type, stored);
    return this.withServedVersion(type, stored);
  }

  /** Defaults the simulator's pretend controllers would set (pod scheduled and running, CRD established). */
  private prepareForCreate(type: ResourceType, object: KubeObject, fromFixture: boolean): KubeObject {
    if (type.kind === 'Pod' && type.group === '' && !fromFixture && this.hooks.preparePod) return this.hooks.preparePod(object);
    if (type.kind === 'Pod' && type.group === '') {
      const spec = isPlainObject(object.spec) ? { ...object.spec } : {};
      if (typeof spec.nodeName !== 'string' || spec.nodeName === '') {
        const nodes = [...this.store.list('nodes', undefined)];
        if (nodes.length > 0) spec.nodeName = nodes[this.scheduleCounter++ % nodes.length]!.metadata.name!;
      }
      const status = isPlainObject(object.status) ? { ...object.status } : {};
      if (typeof status.phase !== 'string')
        status.phase = typeof spec.nodeName === 'string' && spec.nodeName !== '' ? 'Running' : 'Pending';
      if (status.startTime === undefined) status.startTime = this.timestamp();
      return { ...object, spec, status };
    }
    if (type.kind === 'Service' && type.group === '' && !fromFixture) {
      return allocateServiceAddresses(object, this.otherServices(type, object));
    }
    if (type.kind === 'Namespace' && type.group === '') {
      const status = isPlainObject(object.status) ? object.status : {};
      return { ...object, status: { phase: 'Active', ...status } };
    }
    if (type.kind === 'CustomResourceDefinition') {
      const deferred = this.deferCrdEstablishment && !fromFixture;
      return { ...object, status: crdStatus(object, this.timestamp(), !deferred) };
    }
    return object;
  }

  /** Every stored Service but `service` (whose addresses another may not take). */
  private otherServices(type: ResourceType, service: KubeObject): KubeObject[] {
    return [...this.store.list(storageKey(type), undefined)].filter(
      (s) => s.metadata.namespace !== service.metadata.namespace || s.metadata.name !== service.metadata.name,
    );
  }

  /**
   * Marks a CRD created while `deferCrdEstablishment` was on as Established and serves its
   * resources (a MODIFIED event). False when it is gone or already established.
   */
  establishCrd(name: string): boolean {
    const current = this.store.get(crdKey, '', name);
    if (!current || isEstablished(current)) return false;
    const established: KubeObject = {
      ...current,
      status: crdStatus(current, this.timestamp(), true),
      metadata: { ...current.metadata, resourceVersion: String(this.store.nextRv()) },
    };
    this.store.put(crdKey, established);
    this.registerCrd(established, undefined);
    return true;
  }

  private afterWrite(type: ResourceType, object: KubeObject, previous: KubeObject | undefined): void {
    if (storageKey(type) === crdKey && isEstablished(object)) this.registerCrd(object, previous);
    if (!previous && type.kind === 'Pod' && type.group === '') this.hooks.onPodCreated?.(object);
    if (previous) this.hooks.onUpdated?.(type, object, previous);
  }

  update(
    type: ResourceType,
    namespace: string,
    name: string,
    body: unknown,
    subresource: 'status' | undefined,
    options: WriteOptions = {},
  ): KubeObject {
    const object = this.normaliseBody(type, namespace, body);
    if (object.metadata.name !== undefined && object.metadata.name !== name) {
      throw apiError('BadRequest', `the name of the object (${String(object.metadata.name)}) does not match the name on the URL (${name})`);
    }
    object.metadata.name = name;
    const key = storageKey(type);
    const current = this.store.get(key, type.namespaced ? namespace : '', name);
    if (!current) throw notFound(type.plural, type.group, name);
    const givenRv = object.metadata.resourceVersion;
    if (givenRv !== undefined && givenRv !== '' && givenRv !== current.metadata.resourceVersion)
      throw conflict(type.plural, type.group, name);
    if ((givenRv === undefined || givenRv === '') && type.schema) {
      throw invalid(type.kind, type.group, name, [
        { reason: 'FieldValueInvalid', field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' },
      ]);
    }
    let next: KubeObject;
    if (subresource === 'status') {
      next = { ...current, status: object.status };
      if (object.status === undefined) delete next.status;
    } else {
      next = { ...object };
      if (type.hasStatus) {
        if (current.status === undefined) delete next.status;
        else next.status = current.status;
      }
    }
    next = this.validateContent(type, next, options, current);
    options.admit?.(type, next, current, subresource);
    if (type.kind === 'Service' && type.group === '' && subresource !== 'status') {
      next = allocateServiceAddresses(next, this.otherServices(type, current), current);
    }
    const metadata: ObjectMeta =
      subresource === 'status'
        ? { ...current.metadata }
        : { ...next.metadata, uid: current.metadata.uid, creationTimestamp: current.metadata.creationTimestamp };
    if (current.metadata.deletionTimestamp) metadata.deletionTimestamp = current.metadata.deletionTimestamp;
    else delete metadata.deletionTimestamp;
    delete metadata.managedFields;
    const specChanged = !deepEqual(withoutMetaAndStatus(current), withoutMetaAndStatus(next));
    metadata.generation = (current.metadata.generation ?? 1) + (specChanged && subresource !== 'status' ? 1 : 0);
    metadata.resourceVersion = current.metadata.resourceVersion;
    next = { ...next, metadata };
    if (type.kind === 'CustomResourceDefinition') next.status = keepTransitionTimes(crdStatus(next, this.timestamp()), current.status);
    // A no-op write keeps the resourceVersion and sends no event, as the API server does.
    if (deepEqual(next, current)) return this.withServedVersion(type, current);
    if (options.dryRun) return next;
    if (metadata.deletionTimestamp && (metadata.finalizers ?? []).length === 0) {
      metadata.resourceVersion = String(this.store.nextRv());
      this.removeStored(type, next);
      return this.withServedVersion(type, next);
    }
    metadata.resourceVersion = String(this.store.nextRv());
    this.store.put(key, next);
    this.afterWrite(type, next, current);
    return this.withServedVersion(type, next);
  }

  patch(
    type: ResourceType,
    namespace: string,
    name: string,
    patchType: PatchType,
    patch: unknown,
    subresource: 'status' | undefined,
    options: WriteOptions = {},
  ): KubeObject {
    if (patchType === 'strategic' && !this.registry.isBuiltin(storageKey(type))) {
      throw apiError(
        'UnsupportedMediaType',
        'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
      );
    }
    const current = this.store.get(storageKey(type), type.namespaced ? namespace : '', name);
    if (!current) {
      if (patchType === 'apply' && subresource === undefined) return this.create(type, namespace, patch, options);
      throw notFound(type.plural, type.group, name);
    }
    if (patchType !== 'json' && !isPlainObject(patch)) throw apiError('BadRequest', 'the patch must be a JSON object');
    let patched: unknown;
    switch (patchType) {
      case 'json':
        patched = applyJsonPatch(current, patch);
        break;
      case 'merge':
      case 'apply':
        patched = applyMergePatch(current, patch);
        break;
      case 'strategic':
        patched = applyStrategicMergePatch(current, patch);
        break;
    }
    if (!isPlainObject(patched)) throw apiError('BadRequest', 'the patched object is not a JSON object');
    const patchedMeta = isPlainObject(patched.metadata) ? patched.metadata : {};
    // A patch without a resourceVersion is unconditional.
    const rv = patchedMeta.resourceVersion === undefined ? current.metadata.resourceVersion : patchedMeta.resourceVersion;
    return this.update(type, namespace, name, { ...patched, metadata: { ...patchedMeta, resourceVersion: rv } }, subresource, options);
  }

  delete(
    type: ResourceType,
    namespace: string,
    name: string,
    options: WriteOptions & { preconditionRv?: string; preconditionUid?: string } = {},
  ): KubeObject {
    const key = storageKey(type);
    const current = this.store.get(key, type.namespaced ? namespace : '', name);
    if (!current) throw notFound(type.plural, type.group, name);
    if (options.preconditionRv && options.preconditionRv !== current.metadata.resourceVersion)
      throw conflict(type.plural, type.group, name);
    if (options.preconditionUid && options.preconditionUid !== current.metadata.uid) throw conflict(type.plural, type.group, name);
    if (options.dryRun) return current;
    if ((current.metadata.finalizers ?? []).length > 0) {
      if (current.metadata.deletionTimestamp) return this.withServedVersion(type, current);
      const marked: KubeObject = {
        ...current,
        metadata: { ...current.metadata, deletionTimestamp: this.timestamp(), resourceVersion: String(this.store.nextRv()) },
      };
      this.store.put(key, marked);
      return this.withServedVersion(type, marked);
    }
    const finalState: KubeObject = { ...current, metadata: { ...current.metadata, resourceVersion: String(this.store.nextRv()) } };
    this.removeStored(type, finalState);
    return this.withServedVersion(type, finalState);
  }

  private removeStored(type: ResourceType, finalState: KubeObject): void {
    const key = storageKey(type);
    this.store.remove(key, finalState);
    if (key === 'namespaces') this.deleteNamespaceContents(finalState.metadata.name!);
    if (key === crdKey) this.unregisterCrd(finalState);
    this.hooks.onDeleted?.(type, finalState);
  }

  deleteCollection(type: ResourceType, namespace: string | undefined, filter: ObjectFilter): KubeObject[] {
    const { items } = this.list(type, namespace, { filter });
    return items.map((item) => this.delete(type, item.metadata.namespace ?? '', item.metadata.name!));
  }

  /** The sim deletes a namespace's contents at once (a real cluster's namespace controller takes a while). */
  private deleteNamespaceContents(namespace: string): void {
    const seen = new Set<string>();
    for (const group of [...this.registry.groups().entries(), ['', ['v1']] as [string, string[]]]) {
      const [groupName, versions] = group;
      for (const version of versions) {
        for (const type of this.registry.groupVersion(groupName, version) ?? []) {
          const key = storageKey(type);
          if (!type.namespaced || seen.has(key)) continue;
          seen.add(key);
          for (const object of [...this.store.list(key, namespace)]) {
            const finalState: KubeObject = { ...object, metadata: { ...object.metadata, resourceVersion: String(this.store.nextRv()) } };
            this.store.remove(key, finalState);
            this.hooks.onDeleted?.(type, finalState);
          }
        }
      }
    }
  }

  private registerCrd(crd: KubeObject, previous: KubeObject | undefined): void {
    if (previous) this.registry.removeCrd(previous.metadata.name!);
    for (const type of resourceTypesOfCrd(crd)) this.registry.add(type);
  }

  private unregisterCrd(crd: KubeObject): void {
    const removed = this.registry.removeCrd(crd.metadata.name!);
    const first = removed[0];
    if (!first) return;
    const key = storageKey(first);
    for (const object of [...this.store.list(key, undefined)]) {
      const finalState: KubeObject = { ...object, metadata: { ...object.metadata, resourceVersion: String(this.store.nextRv()) } };
      this.store.remove(key, finalState);
    }
    this.store.dropBucket(key);
  }

  /**
   * Subscribes to changes of `type` (in `namespace`, or all when undefined) matching `filter`.
   * `sinceRv`: undefined/0 = synthetic ADDED for current state first; a number = replay history after it.
   * Returns undefined (after sending nothing) when history before sinceRv is gone: the caller answers 410.
   */
  watch(
    type: ResourceType,
    namespace: string | undefined,
    filter: ObjectFilter,
    sinceRv: number | undefined,
    send: (event: WatchEvent) => void,
  ): (() => void) | 'expired' {
    const key = storageKey(type);
    const scopedNamespace = type.namespaced ? namespace : undefined;
    const toWatchEvent = (event: ChangeEvent): WatchEvent | undefined => {
      if (scopedNamespace !== undefined && event.namespace !== scopedNamespace) return undefined;
      const nowMatches = matchesFilter(filter, event.object);
      const wasMatching = event.previous !== undefined && matchesFilter(filter, event.previous);
      const object = this.withServedVersion(type, event.object);
      if (event.type === 'DELETED') return wasMatching ? { type: 'DELETED', object } : undefined;
      if (event.type === 'ADDED') return nowMatches ? { type: 'ADDED', object } : undefined;
      if (nowMatches && wasMatching) return { type: 'MODIFIED', object };
      if (nowMatches) return { type: 'ADDED', object };
      if (wasMatching) return { type: 'DELETED', object };
      return undefined;
    };
    let backlog: ChangeEvent[];
    if (sinceRv === undefined || sinceRv === 0) {
      for (const object of this.store.list(key, scopedNamespace)) {
        if (matchesFilter(filter, object)) send({ type: 'ADDED', object: this.withServedVersion(type, object) });
      }
      backlog = [];
    } else {
      const events = this.store.eventsSince(key, sinceRv);
      if (!events) return 'expired';
      backlog = events;
    }
    for (const event of backlog) {
      const watchEvent = toWatchEvent(event);
      if (watchEvent) send(watchEvent);
    }
    return this.store.subscribe(key, (event) => {
      const watchEvent = toWatchEvent(event);
      if (watchEvent) send(watchEvent);
    });
  }
}

function withoutMetaAndStatus(object: KubeObject): Record<string, unknown> {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = object;
  return rest;
}

function encodeContinue(lastKey: string, rv: number): string {
  return Buffer.from(JSON.stringify({ v: 1, rv, start: lastKey })).toString('base64url');
}

function decodeContinue(token: string): { start: string; rv: number } {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (
      isPlainObject(parsed) &&
      parsed.v === 1 &&
      typeof parsed.start === 'string' &&
      typeof parsed.rv === 'number' &&
      Number.isInteger(parsed.rv) &&
      parsed.rv >= 0
    )
      return { start: parsed.start, rv: parsed.rv };
  } catch {
    // fall through
  }
  throw apiError('BadRequest', 'continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
}

function validateCrd(crd: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const spec = isPlainObject(crd.spec) ? crd.spec : undefined;
  if (!spec) return [{ reason: 'FieldValueRequired', field: 'spec', message: 'Required value' }];
  const names = isPlainObject(spec.names) ? spec.names : {};
  if (typeof spec.group !== 'string' || spec.group === '')
    causes.push({ reason: 'FieldValueRequired', field: 'spec.group', message: 'Required value' });
  if (typeof names.plural !== 'string' || names.plural === '')
    causes.push({ reason: 'FieldValueRequired', field: 'spec.names.plural', message: 'Required value' });
  if (typeof names.kind !== 'string' || names.kind === '')
    causes.push({ reason: 'FieldValueRequired', field: 'spec.names.kind', message: 'Required value' });
  if (spec.scope !== 'Namespaced' && spec.scope !== 'Cluster') {
    causes.push({
      reason: 'FieldValueNotSupported',
      field: 'spec.scope',
      message: `Unsupported value: ${JSON.stringify(spec.scope)}: supported values: "Cluster", "Namespaced"`,
    });
  }
  if (!Array.isArray(spec.versions) || spec.versions.length === 0) {
    causes.push({
      reason: 'FieldValueRequired',
      field: 'spec.versions',
      message: 'Required value: must have exactly one version marked as storage version',
    });
  } else {
    spec.versions.forEach((version, i) => {
      if (!isPlainObject(version) || typeof version.name !== 'string' || version.name === '') {
        causes.push({ reason: 'FieldValueRequired', field: `spec.versions[${i}].name`, message: 'Required value' });
      }
    });
  }
  if (causes.length === 0 && crd.metadata.name !== `${String(names.plural)}.${String(spec.group)}`) {
    causes.push({
      reason: 'FieldValueInvalid',
      field: 'metadata.name',
      message: `Invalid value: "${crd.metadata.name}": must be spec.names.plural+"."+spec.group`,
    });
  }
  return causes;
}

function crdStatus(crd: KubeObject, timestamp: string, established = true): Record<string, unknown> {
  const spec = isPlainObject(crd.spec) ? crd.spec : {};
  const versions = Array.isArray(spec.versions) ? spec.versions : [];
  const storedVersions = versions.filter((v) => isPlainObject(v) && v.storage === true).map((v) => (v as Record<string, unknown>).name);
  return {
    acceptedNames: spec.names ?? {},
    conditions: [
      { type: 'NamesAccepted', status: 'True', reason: 'NoConflicts', message: 'no conflicts found', lastTransitionTime: timestamp },
      established
        ? {
            type: 'Established',
            status: 'True',
            reason: 'InitialNamesAccepted',
            message: 'the initial names have been accepted',
            lastTransitionTime: timestamp,
          }
        : {
            type: 'Established',
            status: 'False',
            reason: 'Installing',
            message: 'the resource is being installed',
            lastTransitionTime: timestamp,
          },
    ],
    storedVersions,
  };
}

/**
 * A condition's lastTransitionTime moves only when its status does (as every Kubernetes controller
 * keeps it): a write that leaves a CRD's conditions as they were changes nothing.
 */
function keepTransitionTimes(status: Record<string, unknown>, previous: unknown): Record<string, unknown> {
  const before = isPlainObject(previous) && Array.isArray(previous.conditions) ? previous.conditions.filter(isPlainObject) : [];
  const conditions = Array.isArray(status.conditions) ? status.conditions.filter(isPlainObject) : [];
  return {
    ...status,
    conditions: conditions.map((c) => {
      const old = before.find((b) => b.type === c.type && b.status === c.status);
      return old ? { ...c, lastTransitionTime: old.lastTransitionTime } : c;
    }),
  };
}

/** True when the CRD's Established condition is True (its resources are served). */
export function isEstablished(crd: KubeObject): boolean {
  const status = isPlainObject(crd.status) ? crd.status : {};
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  return conditions.some((c) => isPlainObject(c) && c.type === 'Established' && c.status === 'True');
}

export function resourceTypesOfCrd(crd: KubeObject): ResourceType[] {
  const spec = isPlainObject(crd.spec) ? crd.spec : {};
  const names = isPlainObject(spec.names) ? spec.names : {};
  const plural = String(names.plural ?? '');
  const kind = String(names.kind ?? '');
  const group = String(spec.group ?? '');
  const versions = Array.isArray(spec.versions) ? spec.versions : [];
  const types: ResourceType[] = [];
  for (const version of versions) {
    if (!isPlainObject(version) || version.served === false || typeof version.name !== 'string') continue;
    const subresources = isPlainObject(version.subresources) ? version.subresources : {};
    const schemaHolder = isPlainObject(version.schema) ? version.schema : {};
    const type: ResourceType = {
      group,
      version: version.name,
      plural,
      singular: typeof names.singular === 'string' && names.singular !== '' ? names.singular : kind.toLowerCase(),
      kind,
      namespaced: spec.scope !== 'Cluster',
      shortNames: Array.isArray(names.shortNames) ? names.shortNames.filter((s): s is string => typeof s === 'string') : [],
      categories: Array.isArray(names.categories) ? names.categories.filter((s): s is string => typeof s === 'string') : [],
      hasStatus: isPlainObject(subresources.status),
      crdName: crd.metadata.name!,
    };
    if (isPlainObject(schemaHolder.openAPIV3Schema)) type.schema = schemaHolder.openAPIV3Schema as never;
    const columns = Array.isArray(version.additionalPrinterColumns) ? version.additionalPrinterColumns : [];
    type.printerColumns = columns.filter(
      (c): c is PrinterColumn =>
        isPlainObject(c) && typeof c.name === 'string' && typeof c.jsonPath === 'string' && typeof c.type === 'string',
    );
    types.push(type);
  }
  return types;
}

export { ApiError };

/** Everything stored, for returning to a loaded fixture later (uids and timestamps kept). */
export interface ClusterSnapshot {
  entries: { key: string; object: KubeObject }[];
}

export function snapshotCluster(state: ClusterState): ClusterSnapshot {
  const entries: { key: string; object: KubeObject }[] = [];
  for (const key of state.store.keys()) for (const object of state.store.list(key, undefined)) entries.push({ key, object });
  return { entries };
}

/** Replaces all state by the snapshot; objects get fresh resourceVersions and no watch events are sent. */
export function restoreCluster(state: ClusterState, snapshot: ClusterSnapshot): void {
  for (const crd of [...state.store.list(crdKey, undefined)]) state.registry.removeCrd(crd.metadata.name!);
  state.store.clear();
  for (const { key, object } of snapshot.entries) {
    const restored: KubeObject = { ...object, metadata: { ...object.metadata, resourceVersion: String(state.store.nextRv()) } };
    state.store.put(key, restored, { record: false });
    if (key === crdKey) for (const type of resourceTypesOfCrd(restored)) state.registry.add(type);
  }
  state.store.compactHistory();
}
