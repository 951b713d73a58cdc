import { describe, expect, it } from "vitest";
import { CreateCryptoKeyRequestSchema, DecryptRequestSchema, EncryptRequestSchema, GetCryptoKeyRequestSchema, UpdateCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { isImpossibleTimestamp, rfc3339Millis } from "../../src/shared/rfc3339.js";
import { findMisread, holdsMisreadable } from "../../src/transport/json-misread.js";

describe("rfc3339Millis", () => {
  // The operator's --since, --until and --before (a probe of the clock, 2026-11-28): Date.parse took all of these.
  it("reads RFC 3339 date-times only, and no impossible one", () => {
    expect(rfc3339Millis("2026-11-23T10:00:00Z")).toBe(Date.UTC(2026, 10, 23, 10));
    expect(rfc3339Millis("2026-11-23T11:00:00.5+01:00")).toBe(Date.UTC(2026, 10, 23, 10, 0, 0, 500));
    for (const text of ["12", "1", "11/28", "Nov 28 2026", "2026-11-23", "2026-02-30T00:00:00Z", "2026-11-23T10:00:00", "2026-11-23 10:00:00Z"]) {
      expect(rfc3339Millis(text), text).toBeNull();
    }
  });
});

describe("isImpossibleTimestamp", () => {
  it("finds the dates and times RFC 3339 5.7 does not allow, which Date.parse rolls over", () => {
    for (const text of ["2027-02-30T00:00:00Z", "2031-02-29T00:00:00Z", "2027-04-31T12:00:00Z", "2027-01-01T24:00:00Z", "2027-01-00T00:00:00Z", "2027-00-10T00:00:00Z", "2027-13-01T00:00:00Z", "2027-01-01T00:60:00Z", "2027-01-01T00:00:60Z", "2027-01-01T00:00:00+24:00", "2027-01-01T00:00:00-01:60"]) {
      expect(isImpossibleTimestamp(text), text).toBe(true);
    }
  });

  it("takes real moments, leap days included, and leaves other shapes to protobuf-es", () => {
    for (const text of ["2028-02-29T00:00:00Z", "2000-02-29T23:59:59.999999999Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2027-06-30T12:00:00+14:00", "2027-01-31T00:00:00-23:59", "not a time", "2027-02-30"]) {
      expect(isImpossibleTimestamp(text), text).toBe(false);
    }
    expect(isImpossibleTimestamp("1900-02-29T00:00:00Z")).toBe(true);
  });
});

describe("findMisread", () => {
  it("walks only the types that can hold an integer or a Timestamp, and names the field's JSON path as the caller wrote it", () => {
    expect(holdsMisreadable(UpdateCryptoKeyRequestSchema)).toBe(true);
    expect(holdsMisreadable(GetCryptoKeyRequestSchema)).toBe(false);
    const found = findMisread(UpdateCryptoKeyRequestSchema, { key: { next_rotation_time: "2027-02-30T00:00:00Z" } }, "");
    expect(found?.path).toBe("key.next_rotation_time");
    expect(found?.field.name).toBe("next_rotation_time");
    expect(findMisread(UpdateCryptoKeyRequestSchema, { key: { nextRotationTime: "2027-02-28T00:00:00Z" } }, "")).toBeUndefined();
    expect(findMisread(UpdateCryptoKeyRequestSchema, { key: null, updateMask: "x" }, "")).toBeUndefined();
  });

  it("finds an integer written as a string of any form but decimal digits, in a field or a list's element", () => {
    for (const text of ["0x1", "0b1", "0o1", "1e0", "1.0", "+1", " 1", ""]) {
      expect(findMisread(EncryptRequestSchema, { keyId: "k", keyVersionId: text }, "")?.path, text).toBe("keyVersionId");
    }
    for (const ok of ["1", "-1", "0", 1, 1.0, 1e0]) expect(findMisread(EncryptRequestSchema, { keyVersionId: ok }, ""), String(ok)).toBeUndefined();
    expect(findMisread(CreateCryptoKeyRequestSchema, { parentId: "p", rotationPeriod: "86400s" }, "")).toBeUndefined();
  });
});

describe("findMisread of bytes", () => {
  it("finds bytes that are not base64 in one of its two forms, and takes every form the proto3 JSON mapping allows", () => {
    expect(holdsMisreadable(DecryptRequestSchema)).toBe(true);
    for (const text of ["=aGk", "aGk=aGk=", "aGk=====", "aG k=", "a===", " ", "\n", "+/-_", "aGk*", "ŁŁŁŁ"]) {
      expect(findMisread(EncryptRequestSchema, { keyId: "k", plaintext: "aGk=", additionalAuthenticatedData: text }, "")?.path, text).toBe("additionalAuthenticatedData");
      expect(findMisread(DecryptRequestSchema, { keyId: "k", ciphertext: text }, "")?.path, text).toBe("ciphertext");
    }
    for (const ok of ["aGk=", "aGk", "", "+/+/", "-_-_", "-_8", null]) {
      expect(findMisread(EncryptRequestSchema, { keyId: "k", plaintext: ok, additional_authenticated_data: ok }, ""), String(ok)).toBeUndefined();
    }
  });
});
