import type { ComputeStore } from "./compute-store.js";
import type { AuditStore, IdentityStore } from "./identity-store.js";
import type { KmsStore, MasterKeyStore } from "./kms-store.js";
import type { NodeLedger } from "./node-ledger.js";
import type { VAppStore } from "./vapp-store.js";

// What the server learns about changes other servers made to a shared store (PostgreSQL's notifications,
// postgres/change-feed.ts), so that its caches follow them. The embedded store is one server's alone and announces
// nothing.
// Who opens a store: a server, which the embedded store allows one of per data directory, or an operator command
// (cloudplane-admin), which works beside the running server.
export type StorageOpener = "server" | "operator command";

// What can be read of the master key's binding before a store is upgraded, on any of its schemas.
export type MasterKeyReader = Pick<MasterKeyStore, "readMasterKeyCheck" | "anyWrappedMaterial">;

// Run by a server before it upgrades the store (it refuses a wrong master key there, so that a refusal changes
// nothing); a throw stops the opening.
export type BeforeMigrations = (reader: MasterKeyReader) => Promise<void>;

export interface ChangeListener {
  // A key or one of its versions changed: its cached entry must go.
  keyChanged(keyId: string): void;
  // Credentials or grants changed.
  accessChanged(): void;
  // A task was stored: a worker with a free slot may take it.
  taskStored(): void;
  // A task finished: its waiters may answer.
  taskFinished(taskId: string): void;
  // Whether every change committed more than the feed's bound ago has been announced. While false, nothing cached
  // from the store may be served; on the way back to true whatever was cached meanwhile must be dropped.
  feedLive(live: boolean): void;
}

// Every store the server uses, on one database, chosen by open-storage.ts. The domain sees only these interfaces.
export interface Storage {
  readonly kind: "sqlite" | "postgres";
  readonly kms: KmsStore & MasterKeyStore;
  readonly compute: ComputeStore;
  readonly vapps: VAppStore;
  readonly ledger: NodeLedger;
  readonly identity: IdentityStore;
  readonly audit: AuditStore;
  // Runs the start-up steps that must not run on two servers at once (the master key check, bootstrapping the
  // admin account) while no other server on the same database runs its own.
  exclusively<T>(steps: () => Promise<T>): Promise<T>;
  // Starts announcing other servers' changes to the listener.
  watch(listener: ChangeListener): Promise<void>;
  close(): Promise<void>;
}
