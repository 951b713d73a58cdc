import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { open, seal } from "../../src/kms/ciphertext.js";
import { KeyCache } from "../../src/kms/key-cache.js";
import { MasterKey } from "../../src/kms/master-key.js";
import type { KeyAggregate, VersionState } from "../../src/kms/model.js";

// The cache holds its entries packed (src/kms/packed-keys.ts): slots reused once an entry goes, material wiped when
// it does. What a call reads through a cache hit is good for its synchronous turn; what a call built itself (a
// miss, a mutation) stays good however long the call runs.

const master = new MasterKey(randomBytes(32));

function aggregate(id: string, material: Buffer, states: VersionState[] = ["ENABLED"], labels: string[] = []): KeyAggregate {
  return {
    key: {
      id, parentId: "ns", name: `name of ${id}`, description: `about ${id}`, owner: "admin", labels, rotationPeriodMs: null, nextRotationAt: null,
      defaultAlgorithm: "AES_256", primaryVersionId: states.length, nextVersionId: states.length + 1, createdAt: 1, goneAt: null,
    },
    versions: states.map((state, i) => ({
      keyId: id, id: i + 1, state, algorithm: "AES_256" as const, createdAt: 1 + i, destroyAt: state === "DESTROYED_SCHEDULED" ? 99 : null,
      wrappedMaterial: master.wrap(material, id, i + 1),
    })),
  };
}

describe("packed cache entries", () => {
  it("answer every field as built, for thousands of keys whose slots are reused as others come and go", () => {
    const cache = new KeyCache(master, 500);
    const materials = new Map<string, Buffer>();
    for (let i = 0; i < 3000; i++) {
      const id = `k${i}`;
      const material = randomBytes(32);
      materials.set(id, material);
      const states: VersionState[] = i % 3 === 0 ? ["DISABLED", "ENABLED"] : ["ENABLED"];
      const built = cache.build(aggregate(id, material, states, i % 2 === 0 ? ["team=a"] : []));
      const expected = { view: built.view, infos: built.infosPage(0, 10), second: built.infosPage(1, 1) };
      cache.install(built);
      const hit = cache.get(id)!;
      expect({ view: hit.view, infos: hit.infosPage(0, 10), second: hit.infosPage(1, 1) }).toEqual(expected);
      expect(hit.parentId).toBe("ns");
      expect(hit.goneAt).toBeNull();
    }
    // The last 500 are cached; each seals with its own material, which opens under a key made from it alone.
    for (let i = 2500; i < 3000; i++) {
      const id = `k${i}`;
      const entry = cache.get(id)!;
      const versionId = i % 3 === 0 ? 2 : 1;
      expect(entry.version(1)!.key === null).toBe(i % 3 === 0);
      const sealed = seal(entry.version(versionId)!.key!, Buffer.from(id), Buffer.from("aad"));
      const own = { algorithm: "AES_256" as const, versionId, keyId: id, material: materials.get(id)! };
      expect(Buffer.from(open(own, sealed, Buffer.from("aad"))!).toString()).toBe(id);
    }
    expect(cache.get("k2499")).toBeUndefined();
  });

  it("find every key installed and not evicted, in any order of installs, reinstalls and evictions", () => {
    // A Map of the same keys is the model: installing a key makes it the newest, the oldest goes past the bound.
    // 1000 keys fill the hash table's first 2048 buckets to half, so that runs of probes wrap around its end.
    const cache = new KeyCache(master, 1000);
    const model = new Map<string, number>();
    let seed = 7;
    const random = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    const material = randomBytes(32);
    for (let step = 0; step < 20_000; step++) {
      // Ids of different lengths, from a pool a little larger than the cache, so that keys come back often.
      const id = `key-${random(1500).toString(36).repeat(1 + random(8))}`;
      if (random(5) === 0) {
        cache.evict(id);
        model.delete(id);
      } else {
        cache.install(cache.build(aggregate(id, material, ["ENABLED"])));
        model.delete(id);
        model.set(id, step);
        if (model.size > 1000) model.delete(model.keys().next().value!);
      }
      if (step % 2500 === 0 || step === 19_999) {
        for (let n = 0; n < 1500; n++) {
          for (let r = 1; r <= 8; r++) {
            const probe = `key-${n.toString(36).repeat(r)}`;
            expect(cache.get(probe)?.view.key.name, probe).toBe(model.has(probe) ? `name of ${probe}` : undefined);
          }
        }
      }
    }
  });

  it("keep ids and names of every length, in any script, whether they fit the inline bytes or not", () => {
    const cache = new KeyCache(master, 1000);
    const texts = ["", "a", "é", "ключ", "🔑", "鍵"].flatMap((unit) => Array.from({ length: 40 }, (_, n) => unit.repeat(n)));
    const ids = texts.filter((t) => t !== "").map((t, i) => `${i}-${t}`);
    for (const [i, id] of ids.entries()) {
      const a = aggregate(id, randomBytes(32));
      a.key.name = texts[i]!;
      cache.install(cache.build(a));
    }
    for (const [i, id] of ids.entries()) {
      expect(cache.get(id)?.view.key, id).toMatchObject({ id, name: texts[i] });
      // Another id of the same length, or a prefix, is another key.
      expect(cache.get(`${id}x`)).toBeUndefined();
      expect(cache.get(id.slice(0, -1))?.view.key.id ?? "").not.toBe(id);
    }
  });

  it("keep version ids up to 2^32 - 1, the largest a ciphertext can name", () => {
    const cache = new KeyCache(master, 10);
    const a = aggregate("big", randomBytes(32), ["ENABLED", "ENABLED"]);
    a.versions[0]!.id = 2 ** 31;
    a.versions[1]!.id = 2 ** 32 - 1;
    a.versions.forEach((v) => (v.wrappedMaterial = master.wrap(randomBytes(32), "big", v.id)));
    a.key.primaryVersionId = 2 ** 32 - 1;
    a.key.nextVersionId = 2 ** 32;
    cache.install(cache.build(a));
    const entry = cache.get("big")!;
    expect(entry.view.key).toMatchObject({ primaryVersionId: 2 ** 32 - 1, nextVersionId: 2 ** 32 });
    expect(entry.view.primary?.id).toBe(2 ** 32 - 1);
    expect(entry.infosPage(0, 10).map((v) => v.id)).toEqual([2 ** 31, 2 ** 32 - 1]);
    expect(entry.version(2 ** 31)?.key?.versionId).toBe(2 ** 31);
  });

  it("share the record that reads return while cached, so its CryptoKey message is built once", () => {
    const cache = new KeyCache(master, 10);
    cache.install(cache.build(aggregate("a", randomBytes(32), ["ENABLED"], ["x=1", "y=2"])));
    const first = cache.get("a")!.view.key;
    expect(cache.get("a")!.view.key).toBe(first);
    expect(Object.isFrozen(first) && Object.isFrozen(first.labels)).toBe(true);
    // Identical label lists are one list.
    cache.install(cache.build(aggregate("b", randomBytes(32), ["ENABLED"], ["x=1", "y=2"])));
    expect(cache.get("b")!.view.key.labels).toBe(first.labels);
  });

  it("a handle used after its entry was evicted or replaced fails instead of reading another key", () => {
    const cache = new KeyCache(master, 1);
    cache.install(cache.build(aggregate("a", randomBytes(32))));
    const stale = cache.get("a")!;
    const staleVersion = stale.version(1)!.key!;
    cache.install(cache.build(aggregate("b", randomBytes(32))));
    expect(() => stale.parentId).toThrow(/after its entry was evicted or replaced/);
    expect(() => staleVersion.material).toThrow(/after its entry was evicted or replaced/);
    const replaced = cache.get("b")!;
    cache.install(cache.build(aggregate("b", randomBytes(32))));
    expect(() => replaced.view).toThrow(/after its entry was evicted or replaced/);
    expect(cache.get("b")!.view.key.id).toBe("b");
  });

  it("a version a call built keeps working after the cache evicted the key, while thousands of others come and go", () => {
    const cache = new KeyCache(master, 100);
    const held = cache.install(cache.build(aggregate("held", randomBytes(32)))).version(1)!.key!;
    const sealed = seal(held, Buffer.from("secret"), Buffer.from("aad"));
    for (let i = 0; i < 5000; i++) cache.install(cache.build(aggregate(`k${i}`, randomBytes(32))));
    expect(cache.get("held")).toBeUndefined();
    expect(Buffer.from(open(held, sealed, Buffer.from("aad"))!).toString()).toBe("secret");
  });

  it("wipes an evicted key's material and keeps none for versions that are not ENABLED", () => {
    const cache = new KeyCache(master, 1);
    const material = randomBytes(32);
    cache.install(cache.build(aggregate("a", material, ["DISABLED", "DESTROYED_SCHEDULED", "ENABLED"])));
    const entry = cache.get("a")!;
    expect([1, 2, 3].map((v) => entry.version(v)!.key === null)).toEqual([true, true, false]);
    const view = entry.version(3)!.key!.material;
    expect(Buffer.from(view)).toEqual(material);
    cache.evict("a");
    expect(Buffer.from(view)).toEqual(Buffer.alloc(32));
  });

  it("a built entry's material unwrapped to check the master key is wiped once the cache has its copy", () => {
    const cache = new KeyCache(master, 10);
    const built = cache.build(aggregate("a", randomBytes(32)));
    const pending = built.version(1)!.material;
    expect(Buffer.from(pending).equals(Buffer.alloc(32))).toBe(false);
    cache.install(built);
    expect(Buffer.from(pending)).toEqual(Buffer.alloc(32));
    // Read again, it is unwrapped from the stored form.
    expect(Buffer.from(built.version(1)!.material)).toEqual(Buffer.from(cache.get("a")!.version(1)!.key!.material));
  });

  it("a distrusted cache wipes and drops everything", () => {
    const cache = new KeyCache(master, 10);
    cache.install(cache.build(aggregate("a", randomBytes(32))));
    const view = cache.get("a")!.version(1)!.key!.material;
    cache.trust(false);
    expect(cache.get("a")).toBeUndefined();
    expect(Buffer.from(view)).toEqual(Buffer.alloc(32));
    cache.install(cache.build(aggregate("a", randomBytes(32))));
    expect(cache.get("a")).toBeUndefined();
  });
});
