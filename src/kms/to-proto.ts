import { create } from "@bufbuild/protobuf";
import type { Duration } from "@bufbuild/protobuf/wkt";
import { DurationSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { CryptoKeySchema, CryptoKeyVersion_Algorithm, CryptoKeyVersion_State, CryptoKeyVersionSchema } from "../../gen/kms/v1/kms_pb.js";
import type { CryptoKey, CryptoKeyVersion } from "../../gen/kms/v1/kms_pb.js";
import { effectiveState } from "./model.js";
import type { VersionInfo } from "./model.js";
import type { KeyView } from "./key-manager.js";

function durationFromMs(ms: number): Duration {
  return create(DurationSchema, { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 });
}

export function versionToProto(v: VersionInfo, now: number): CryptoKeyVersion {
  return create(CryptoKeyVersionSchema, {
    id: v.id,
    keyId: v.keyId,
    state: CryptoKeyVersion_State[effectiveState(v, now)],
    algorithm: CryptoKeyVersion_Algorithm[v.algorithm],
    createdAt: timestampFromMs(v.createdAt),
    destroyAt: v.destroyAt === null ? undefined : timestampFromMs(v.destroyAt),
  });
}

export function keyToProto(view: KeyView, now: number): CryptoKey {
  const { key } = view;
  return create(CryptoKeySchema, {
    id: key.id,
    name: key.name,
    description: key.description,
    owner: key.owner,
    primary: view.primary === null ? undefined : versionToProto(view.primary, now),
    labels: key.labels,
    rotationPeriod: key.rotationPeriodMs === null ? undefined : durationFromMs(key.rotationPeriodMs),
    nextRotationTime: key.nextRotationAt === null ? undefined : timestampFromMs(key.nextRotationAt),
    defaultAlgorithm: CryptoKeyVersion_Algorithm[key.defaultAlgorithm],
    createdAt: timestampFromMs(key.createdAt),
  });
}

// Freezes a message and every message and list in it, so that it can be shared between calls: a handler that
// answers with it cannot be changed by anything after it. Bytes are left as they are (a typed array with
// elements cannot be frozen).
export function freezeMessage<T extends object>(message: T): T {
  for (const value of Object.values(message)) {
    if (typeof value === "object" && value !== null && !ArrayBuffer.isView(value) && !Object.isFrozen(value)) freezeMessage(value);
  }
  return Object.freeze(message);
}
