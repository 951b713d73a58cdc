import { randomBytes } from "node:crypto";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { open, seal } from "../../src/kms/ciphertext.js";
import { KeyCache } from "../../src/kms/key-cache.js";
import { MaterialSlabs, SLOT_BYTES } from "../../src/kms/material-slabs.js";
import { MasterKey } from "../../src/kms/master-key.js";
import type { KeyAggregate } from "../../src/kms/model.js";

// Key material lives in shared slabs; a slot is freed, zeroed, only once the object that took it is collected. So
// these tests collect garbage themselves (gc exposed at run time) and wait for the finalizers to run.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

async function collectUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !done(); i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("MaterialSlabs", () => {
  it("keeps each owner's material in a slot of its own and gives views of the length asked for", () => {
    const slabs = new MaterialSlabs();
    const owners = Array.from({ length: 5000 }, () => ({}));
    const materials = owners.map(() => randomBytes(32));
    const slots = owners.map((o, i) => slabs.store(o, materials[i]!));
    expect(new Set(slots).size).toBe(5000);
    expect(slabs.slotsInUse).toBe(5000);
    slots.forEach((slot, i) => expect(slabs.view(slot, 32)).toEqual(materials[i]));
    expect(slabs.view(slots[7]!, 16)).toEqual(materials[7]!.subarray(0, 16));
    expect(() => slabs.store({}, Buffer.alloc(SLOT_BYTES + 1))).toThrow(/does not fit/);
    expect(owners.length).toBe(5000);
  });

  it("frees a slot, zeroed, once its owner is collected, and never while the owner is reachable", async () => {
    const slabs = new MaterialSlabs();
    const kept = {};
    const keptSlot = slabs.store(kept, Buffer.alloc(32, 0x11));
    let dropped: object | null = {};
    const droppedSlot = slabs.store(dropped, Buffer.alloc(32, 0xaa));
    dropped = null;
    await collectUntil(() => slabs.slotsInUse === 1);
    expect(slabs.slotsInUse).toBe(1);
    expect(slabs.view(droppedSlot, 32)).toEqual(Buffer.alloc(32));
    expect(slabs.view(keptSlot, 32)).toEqual(Buffer.alloc(32, 0x11));
    // The freed slot is the next one given out.
    expect(slabs.store({}, Buffer.alloc(32, 0x22))).toBe(droppedSlot);
    expect(kept).toBeDefined();
  });
});

describe("cached versions and their slots", () => {
  const master = new MasterKey(randomBytes(32));

  function aggregate(id: string, material: Buffer): KeyAggregate {
    return {
      key: {
        id, parentId: "ns", name: id, description: "", owner: "admin", labels: [], rotationPeriodMs: null, nextRotationAt: null,
        defaultAlgorithm: "AES_256", primaryVersionId: 1, nextVersionId: 2, createdAt: 1, goneAt: null,
      },
      versions: [{ keyId: id, id: 1, state: "ENABLED", algorithm: "AES_256", createdAt: 1, destroyAt: null, wrappedMaterial: master.wrap(material, id, 1) }],
    };
  }

  it("a version still held after the cache evicted it keeps its material, while thousands of other keys come and go", async () => {
    const cache = new KeyCache(master, 100);
    const held = cache.install(cache.build(aggregate("held", randomBytes(32)))).version(1)!.key!;
    const sealed = seal(held, Buffer.from("secret"), Buffer.from("aad"));
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 2000; i++) cache.install(cache.build(aggregate(`k${round}-${i}`, randomBytes(32))));
      gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(cache.get("held")).toBeUndefined();
    expect(open(held, sealed, Buffer.from("aad"))?.toString()).toBe("secret");
    expect(seal(held, Buffer.from("again"), new Uint8Array()).length).toBeGreaterThan(0);
  });

  it("a disabled version takes no slot, so keeps no usable key", () => {
    const cache = new KeyCache(master, 100);
    const a = aggregate("disabled", randomBytes(32));
    a.versions[0]!.state = "DISABLED";
    const entry = cache.build(a);
    expect(entry.version(1)!.key).toBeNull();
  });
});
