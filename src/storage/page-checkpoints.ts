// Where ListCryptoKeys' `page.offset` positions are in the key order, so that a deep page seeks instead of skipping.
//
// `page.offset` counts the live keys of a namespace in (createdAt, id) order, and OFFSET reads every key it skips
// (SQLite's and PostgreSQL's alike): page 10,000 of a million keys read a million index entries. Each page served tells where two positions
// are: its first key is at `offset`, and the key after its last (read as one extra row) is at `offset + limit`. A
// later page at or after a known position starts from that key with an index seek and skips only the difference.
//
// A position stays exact while the live keys before it stay the same. That changes when
//  - a key is created that sorts before it (only with a creation time no later than the position's key: the clock
//    gives new keys the latest time, so in practice never),
//  - a key's goneAt changes (destroy, restore, the sweeper), or
//  - the time passes the goneAt of a key of the namespace (a scheduled destruction coming due).
// The store reports the first two (keyCreated, forget), which forget the namespace's positions; the third is
// `validUntil`, the earliest goneAt still to come in the namespace when its positions were first recorded. The
// embedded store owns its database alone (one server per data directory), so no write goes unreported; the
// PostgreSQL store hears of other servers' writes through its change feed and keeps positions only while the feed
// is live (postgres-kms-store.ts).
//
// A read that runs while a write commits may see the namespace before or after it, so what it found is recorded only
// if nothing was forgotten since it started (`generation`, read before the read).

export interface KeyPosition {
  readonly createdAt: number;
  readonly id: string;
}

interface Namespace {
  // Recorded at `since`; exact until `validUntil` (exclusive).
  since: number;
  validUntil: number;
  positions: Map<number, KeyPosition>;
}

// Bounds, so that the checkpoints of a server that lists many namespaces stay small: enough positions for every
// page a client keeps coming back to.
const MAX_NAMESPACES = 1024;
const MAX_POSITIONS = 256;

export class PageCheckpoints {
  private readonly namespaces = new Map<string, Namespace>();
  private forgotten = 0;

  // Read before reading a page, and handed to record.
  get generation(): number {
    return this.forgotten;
  }

  // The known position nearest at or before `offset`, when it can be trusted at `now`.
  nearest(parentId: string, offset: number, now: number): { offset: number; key: KeyPosition } | null {
    const ns = this.namespaces.get(parentId);
    if (ns === undefined) return null;
    if (now < ns.since || now >= ns.validUntil) {
      this.namespaces.delete(parentId);
      return null;
    }
    let best: { offset: number; key: KeyPosition } | null = null;
    for (const [at, key] of ns.positions) {
      if (at <= offset && (best === null || at > best.offset)) best = { offset: at, key };
    }
    return best;
  }

  // Records that the live key at position `offset` at `now` is `key`, unless a position was forgotten since
  // `generation` was read. `validUntil` is only consulted when the namespace has no positions yet (see above); the
  // function reading it is called only then.
  record(parentId: string, offset: number, key: KeyPosition, now: number, validUntil: () => number, generation: number): void {
    if (generation !== this.forgotten) return;
    let ns = this.namespaces.get(parentId);
    if (ns !== undefined && (now < ns.since || now >= ns.validUntil)) {
      this.namespaces.delete(parentId);
      ns = undefined;
    }
    if (ns === undefined) {
      ns = { since: now, validUntil: validUntil(), positions: new Map() };
      if (this.namespaces.size >= MAX_NAMESPACES) this.namespaces.delete(this.namespaces.keys().next().value!);
      this.namespaces.set(parentId, ns);
    }
    ns.positions.delete(offset);
    ns.positions.set(offset, key);
    if (ns.positions.size > MAX_POSITIONS) ns.positions.delete(ns.positions.keys().next().value!);
  }

  // A key was created in the namespace: positions after it move. A read in progress may have seen the namespace
  // without it, so it records nothing either.
  keyCreated(parentId: string, key: KeyPosition): void {
    this.forgotten++;
    const ns = this.namespaces.get(parentId);
    if (ns === undefined) return;
    for (const position of ns.positions.values()) {
      if (key.createdAt < position.createdAt || (key.createdAt === position.createdAt && key.id < position.id)) {
        this.namespaces.delete(parentId);
        return;
      }
    }
  }

  // The live keys of the namespace changed otherwise (a key's goneAt), or may have (another server's write).
  forget(parentId: string): void {
    this.forgotten++;
    this.namespaces.delete(parentId);
  }

  // Every namespace: a write may have gone unreported.
  forgetAll(): void {
    this.forgotten++;
    this.namespaces.clear();
  }
}
