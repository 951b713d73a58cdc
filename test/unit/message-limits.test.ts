import { describe, expect, it } from "vitest";
import { CreateCryptoKeyRequestSchema, EncryptRequestSchema, UpdateCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { holdsBounds, limitsOf } from "../../src/pipeline/message-limits.js";
import { MethodTable } from "../../src/pipeline/method-table.js";
import { apiServices, infrastructureServices } from "../../src/routes.js";
import { BoundOnScalarDesc, LongNameDesc, NodeDesc, SampleDesc, UnboundedDesc } from "./limits-fixture.js";

describe("request limits read from the descriptors", () => {
  it("reads (cloudplane.api.v1.max_items) of the served requests, a FieldMask's included", () => {
    expect(limitsOf(CreateCryptoKeyRequestSchema).byName.get("labels")).toMatchObject({ max: 64, repeated: true, noun: "labels" });
    const update = limitsOf(UpdateCryptoKeyRequestSchema);
    expect(update.byName.get("updateMask")).toMatchObject({ max: 16, mask: true, noun: "paths" });
    expect(update.byName.get("key")?.message?.byName.get("labels")).toMatchObject({ max: 64 });
  });

  it("knows lists, maps, packed numbers and nested messages", () => {
    const sample = limitsOf(SampleDesc);
    expect(sample.byName.get("nums")).toMatchObject({ max: 5, packable: true, list: true });
    expect(sample.byName.get("fixeds")).toMatchObject({ max: 3, packable: true });
    expect(sample.byName.get("innerByKey")).toMatchObject({ max: 3, repeated: true, list: false, noun: "inner by key" });
    expect(sample.byName.get("inner_by_key")).toBe(sample.byName.get("innerByKey"));
    expect(sample.byName.get("one")?.message?.byName.get("tags")).toMatchObject({ max: 2 });
  });

  it("knows which messages hold a bound anywhere within them, recursive ones included", () => {
    expect(holdsBounds(limitsOf(EncryptRequestSchema))).toBe(false);
    expect(holdsBounds(limitsOf(CreateCryptoKeyRequestSchema))).toBe(true);
    expect(holdsBounds(limitsOf(UpdateCryptoKeyRequestSchema))).toBe(true);
    expect(holdsBounds(limitsOf(NodeDesc))).toBe(true);
  });

  it("refuses a repeated field without a bound, a bound on a field that is not repeated, and a field name too long for the JSON count", () => {
    expect(() => limitsOf(UnboundedDesc)).toThrow("fixture.Unbounded.items is a request field of many elements and declares no (cloudplane.api.v1.max_items)");
    expect(() => limitsOf(BoundOnScalarDesc)).toThrow("fixture.BoundOnScalar.name declares (cloudplane.api.v1.max_items) but is neither repeated, a map nor a FieldMask");
    // The JSON count reads only the start of a longer member name (src/transport/limits/json-count.ts).
    expect(() => limitsOf(LongNameDesc)).toThrow(`fixture.LongName.${"n".repeat(257)}: field names of more than 256 characters are not supported`);
  });

  it("every served method's request has its bounds, so the server starts", () => {
    for (const service of [...apiServices, ...infrastructureServices]) {
      for (const method of service.methods) expect(limitsOf(method.input).desc).toBe(method.input);
    }
    const table = new MethodTable([], infrastructureServices, []);
    for (const entry of table.entries()) expect(entry.limits.desc).toBe(entry.method.input);
  });
});
