import type { NodePoolRecord, NodePoolState } from "../compute/node-pools/node-pool-model.js";
import type { NodePoolChange, TaskCommand, TaskFailure, TaskRecord, TaskStatus } from "../compute/tasks/task-model.js";
import type { AccessTokenRecord, ApiKeyRecord, GrantRecord, ServiceAccountRecord } from "../identity/identity-model.js";
import { isRole } from "../identity/roles.js";
import { formatScope, parseScope } from "../identity/scopes.js";
import type { Algorithm, CryptoKeyRecord, CryptoKeyVersionRecord, VersionState, VersionTally } from "../kms/model.js";
import type { MasterKeyCheckRecord, WrappedMaterial } from "./kms-store.js";
import type { PlacedNodes } from "./node-ledger.js";

// The one mapping between stored rows and domain records, shared by the SQLite and the PostgreSQL stores: both
// have the same tables and columns (migrations.ts of each), integers come back as numbers (the PostgreSQL pool
// parses BIGINT so), blobs as Buffers, and small documents (labels, a task's change, failure and result) are JSON
// text. `...Params` give the row as a column -> value object: SQLite binds it by name, PostgreSQL by position over
// its keys (postgres/sql.ts).

export interface KeyRow {
  id: string;
  parent_id: string;
  name: string;
  description: string;
  owner: string;
  labels: string;
  rotation_period_ms: number | null;
  next_rotation_at: number | null;
  default_algorithm: string;
  primary_version_id: number | null;
  next_version_id: number;
  created_at: number;
  gone_at: number | null;
}

export interface VersionRow {
  key_id: string;
  id: number;
  state: string;
  algorithm: string;
  created_at: number;
  destroy_at: number | null;
  wrapped_material: Buffer | null;
}

export function keyFromRow(r: KeyRow): CryptoKeyRecord {
  return {
    id: r.id,
    parentId: r.parent_id,
    name: r.name,
    description: r.description,
    owner: r.owner,
    labels: JSON.parse(r.labels) as string[],
    rotationPeriodMs: r.rotation_period_ms,
    nextRotationAt: r.next_rotation_at,
    defaultAlgorithm: r.default_algorithm as Algorithm,
    primaryVersionId: r.primary_version_id,
    nextVersionId: r.next_version_id,
    createdAt: r.created_at,
    goneAt: r.gone_at,
  };
}

export function versionFromRow(r: VersionRow): CryptoKeyVersionRecord {
  return {
    keyId: r.key_id,
    id: r.id,
    state: r.state as VersionState,
    algorithm: r.algorithm as Algorithm,
    createdAt: r.created_at,
    destroyAt: r.destroy_at,
    wrappedMaterial: r.wrapped_material,
  };
}

// The tally of a key's versions that a mutation did not select (VersionTally), as both stores' queries name it.
export interface TallyRow {
  count: number | string;
  live: number | string;
  latest: number | string | null;
}

export function tallyFromRow(r: TallyRow): VersionTally {
  return { count: Number(r.count), live: Number(r.live), latestScheduled: r.latest === null ? null : Number(r.latest) };
}

export function keyParams(k: CryptoKeyRecord): KeyRow {
  return {
    id: k.id,
    parent_id: k.parentId,
    name: k.name,
    description: k.description,
    owner: k.owner,
    labels: JSON.stringify(k.labels),
    rotation_period_ms: k.rotationPeriodMs,
    next_rotation_at: k.nextRotationAt,
    default_algorithm: k.defaultAlgorithm,
    primary_version_id: k.primaryVersionId,
    next_version_id: k.nextVersionId,
    created_at: k.createdAt,
    gone_at: k.goneAt,
  };
}

export function versionParams(v: CryptoKeyVersionRecord): VersionRow {
  return {
    key_id: v.keyId,
    id: v.id,
    state: v.state,
    algorithm: v.algorithm,
    created_at: v.createdAt,
    destroy_at: v.destroyAt,
    wrapped_material: v.wrappedMaterial === null ? null : Buffer.from(v.wrappedMaterial),
  };
}

// The keys that have versions due for erasure at time $1 (at most $3 keys), the most overdue first, found among the
// first $2 due versions by the partial index of material still held (kms_versions_by_destroy_at), so that the work
// is bounded. A plain DISTINCT ... LIMIT let PostgreSQL walk the primary key instead, past every version erased
// before (they stay, without material): with 6M of them ahead of a mass destruction it took over a second, was
// cancelled by the statement timeout at every interval, and nothing more was erased (a probe, 2026-11-28).
// `param` writes the store's placeholder for a parameter's number.
export function dueDestructionSql(param: (n: 1 | 2 | 3) => string): string {
  return `SELECT key_id FROM (
            SELECT key_id, destroy_at FROM kms_versions WHERE wrapped_material IS NOT NULL AND destroy_at IS NOT NULL AND destroy_at <= ${param(1)}
             ORDER BY destroy_at LIMIT ${param(2)}
          ) AS due GROUP BY key_id ORDER BY min(destroy_at), key_id LIMIT ${param(3)}`;
}

// Due versions read per key asked for: a key among them with many due versions leaves fewer keys found, never none.
export const DUE_ROWS_PER_KEY = 50;

// The reads that judge a master key (src/kms/master-key-check.ts). Both stores run them on every schema from the
// first migration on, since a server judges the configured key before it upgrades a store (schema-version.ts).
export const MASTER_KEY_CHECK_SQL = "SELECT scheme, key_id, check_value FROM kms_master_key WHERE id = 1";
export const ANY_WRAPPED_MATERIAL_SQL = "SELECT key_id, id, wrapped_material FROM kms_versions WHERE wrapped_material IS NOT NULL LIMIT 1";

export interface MasterKeyRow {
  scheme: string;
  key_id: string;
  check_value: Buffer;
}

export const masterKeyCheckFromRow = (r: MasterKeyRow): MasterKeyCheckRecord => ({ scheme: r.scheme, keyId: r.key_id, checkValue: r.check_value });

export function masterKeyCheckParams(check: MasterKeyCheckRecord, now: number) {
  return { scheme: check.scheme, key_id: check.keyId, check_value: Buffer.from(check.checkValue), recorded_at: now };
}

export interface WrappedRow {
  key_id: string;
  id: number;
  wrapped_material: Buffer;
}

export const wrappedFromRow = (r: WrappedRow): WrappedMaterial => ({ keyId: r.key_id, versionId: r.id, wrappedMaterial: r.wrapped_material });

export interface PoolRow {
  id: string;
  service_instance_id: string;
  cluster_id: string;
  name: string;
  compute_flavor: string;
  node_count: number;
  state: string;
  active_task_id: string | null;
  pending_name: string | null;
  created_at: number;
  modified_at: number;
}

export function poolFromRow(r: PoolRow): NodePoolRecord {
  return {
    id: r.id,
    serviceInstanceId: r.service_instance_id,
    clusterId: r.cluster_id,
    name: r.name,
    computeFlavor: r.compute_flavor,
    count: r.node_count,
    state: r.state as NodePoolState,
    activeTaskId: r.active_task_id,
    pendingName: r.pending_name,
    createdAt: r.created_at,
    modifiedAt: r.modified_at,
  };
}

export function poolParams(p: NodePoolRecord): PoolRow {
  return {
    id: p.id,
    service_instance_id: p.serviceInstanceId,
    cluster_id: p.clusterId,
    name: p.name,
    compute_flavor: p.computeFlavor,
    node_count: p.count,
    state: p.state,
    active_task_id: p.activeTaskId,
    pending_name: p.pendingName,
    created_at: p.createdAt,
    modified_at: p.modifiedAt,
  };
}

export interface TaskRow {
  id: string;
  command: string;
  status: string;
  service_instance_id: string;
  cluster_id: string;
  node_pool_id: string;
  change: string;
  created_by: string;
  created_at: number;
  modified_at: number;
  failure: string | null;
  result: string | null;
  attempts: number;
}

// The change, the failure and the result are small documents written and read whole, so they are JSON columns.
export function taskFromRow(r: TaskRow): TaskRecord {
  return {
    id: r.id,
    command: r.command as TaskCommand,
    status: r.status as TaskStatus,
    serviceInstanceId: r.service_instance_id,
    clusterId: r.cluster_id,
    nodePoolId: r.node_pool_id,
    change: JSON.parse(r.change) as NodePoolChange,
    createdBy: r.created_by,
    createdAt: r.created_at,
    modifiedAt: r.modified_at,
    failure: r.failure === null ? null : (JSON.parse(r.failure) as TaskFailure),
    result: r.result === null ? null : (JSON.parse(r.result) as NodePoolRecord),
    attempts: r.attempts,
  };
}

export function taskParams(t: TaskRecord): TaskRow {
  return {
    id: t.id,
    command: t.command,
    status: t.status,
    service_instance_id: t.serviceInstanceId,
    cluster_id: t.clusterId,
    node_pool_id: t.nodePoolId,
    change: JSON.stringify(t.change),
    created_by: t.createdBy,
    created_at: t.createdAt,
    modified_at: t.modifiedAt,
    failure: t.failure === null ? null : JSON.stringify(t.failure),
    result: t.result === null ? null : JSON.stringify(t.result),
    attempts: t.attempts,
  };
}

export interface PlacedRow {
  node_pool_id: string;
  cluster_id: string;
  reserved: number;
  ready: number;
}

export function placedFromRow(r: PlacedRow): PlacedNodes {
  return { clusterId: r.cluster_id, nodePoolId: r.node_pool_id, reserved: r.reserved, ready: r.ready };
}

export function placedParams(p: PlacedNodes): PlacedRow {
  return { node_pool_id: p.nodePoolId, cluster_id: p.clusterId, reserved: p.reserved, ready: p.ready };
}

export interface AccountRow {
  id: string;
  name: string;
  client_id: string;
  secret_hash: Buffer;
  created_at: number;
  revoked_at: number | null;
}

export function accountFromRow(r: AccountRow): ServiceAccountRecord {
  return { id: r.id, name: r.name, clientId: r.client_id, secretHash: r.secret_hash, createdAt: r.created_at, revokedAt: r.revoked_at };
}

export function accountParams(a: ServiceAccountRecord): AccountRow {
  return { id: a.id, name: a.name, client_id: a.clientId, secret_hash: Buffer.from(a.secretHash), created_at: a.createdAt, revoked_at: a.revokedAt };
}

export interface TokenRow {
  id: string;
  principal_id: string;
  secret_hash: Buffer;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

export function tokenFromRow(r: TokenRow): AccessTokenRecord {
  return { id: r.id, principalId: r.principal_id, secretHash: r.secret_hash, createdAt: r.created_at, expiresAt: r.expires_at, revokedAt: r.revoked_at };
}

export function tokenParams(t: AccessTokenRecord): TokenRow {
  return {
    id: t.id,
    principal_id: t.principalId,
    secret_hash: Buffer.from(t.secretHash),
    created_at: t.createdAt,
    expires_at: t.expiresAt,
    revoked_at: t.revokedAt,
  };
}

export interface ApiKeyRow {
  id: string;
  principal_id: string;
  workspace_id: string;
  secret_hash: Buffer;
  created_at: number;
  revoked_at: number | null;
}

export function apiKeyFromRow(r: ApiKeyRow): ApiKeyRecord {
  return {
    id: r.id,
    principalId: r.principal_id,
    workspaceId: r.workspace_id,
    secretHash: r.secret_hash,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}

export function apiKeyParams(k: ApiKeyRecord): ApiKeyRow {
  return {
    id: k.id,
    principal_id: k.principalId,
    workspace_id: k.workspaceId,
    secret_hash: Buffer.from(k.secretHash),
    created_at: k.createdAt,
    revoked_at: k.revokedAt,
  };
}

// What a credential check reads besides the credential: its account's revocation and the access generation.
export interface CheckColumns {
  account_revoked_at: number | null;
  generation: number;
}

export interface GrantRow {
  id: string;
  principal_id: string;
  role: string;
  scope: string;
  created_at: number;
}

export function grantFromRow(r: GrantRow): GrantRecord {
  // Only the stores write the table, with values the domain checked; a row that fails these checks is corruption.
  if (!isRole(r.role)) throw new Error(`grant ${r.id} has an unknown role "${r.role}"`);
  return { id: r.id, principalId: r.principal_id, role: r.role, scope: parseScope(r.scope), createdAt: r.created_at };
}

export function grantParams(g: GrantRecord): GrantRow {
  return { id: g.id, principal_id: g.principalId, role: g.role, scope: formatScope(g.scope), created_at: g.createdAt };
}
