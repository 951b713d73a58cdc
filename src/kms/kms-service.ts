import type { ServiceHandlers } from "../pipeline/handlers.js";
import type { CryptoKey, KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { MAX_ID_CHARS } from "../errors/violation-list.js";
import type { Clock } from "../shared/clock.js";
import type { CryptoHandlers } from "./crypto-handlers.js";
import type { KeyChanges, KeyManager, KeyView } from "./key-manager.js";
import {
  Violations,
  algorithmOf,
  checkDescription,
  checkKeyId,
  checkLabels,
  checkName,
  checkParentId,
  checkVersionId,
  maskPathsOf,
  pageOf,
  rotationPeriodOf,
  timestampMsOf,
} from "./request-validation.js";
import { freezeMessage, keyToProto, versionToProto } from "./to-proto.js";

export interface KmsServiceSettings {
  minRotationMs: number;
}

interface KeyMessage {
  message: CryptoKey;
  // Until when the message shows the key as it is: its primary's state is as of `now`, and a scheduled destruction
  // turns into DESTROYED at its time.
  validUntil: number;
}

// The CryptoKey message of each cached key record, built once and frozen (so that every call may share it, and the
// gRPC adapter encodes it once). A mutation installs a new record, which gets a message of its own; the message
// lives as long as the cache entry's record, so only keys that are read hold one.
const keyMessages = new WeakMap<KeyView["key"], KeyMessage>();

function keyMessage(view: KeyView, now: number): CryptoKey {
  const known = keyMessages.get(view.key);
  if (known !== undefined && now < known.validUntil) return known.message;
  const { primary } = view;
  const scheduled = primary !== null && primary.state === "DESTROYED_SCHEDULED" && primary.destroyAt !== null && primary.destroyAt > now;
  const message = freezeMessage(keyToProto(view, now));
  keyMessages.set(view.key, { message, validUntil: scheduled ? primary.destroyAt! : Number.POSITIVE_INFINITY });
  return message;
}

// The transport side of key management: checks the fields of each request, calls the KeyManager, and turns
// its records into messages. No rule of the domain lives here.
export function createKmsService(
  manager: KeyManager,
  crypto: CryptoHandlers,
  clock: Clock,
  settings: KmsServiceSettings,
): ServiceHandlers<typeof KeyManagerService> {
  function versionTarget(req: { keyId: string; keyVersionId: number }): void {
    const v = new Violations();
    checkKeyId(v, "keyId", req.keyId);
    checkVersionId(v, req.keyVersionId);
    v.throwIfAny();
  }

  return {
    encrypt: (req) => crypto.encrypt(req),
    decrypt: (req) => crypto.decrypt(req),

    async listCryptoKeys(req) {
      const v = new Violations();
      checkParentId(v, req.parentId);
      const page = pageOf(v, req.page);
      v.throwIfAny();
      const now = clock.now();
      const keys = await manager.listKeys(req.parentId, page);
      return { keys: keys.map((k) => keyToProto(k, now)) };
    },

    async createCryptoKey(req, call) {
      const v = new Violations();
      checkParentId(v, req.parentId);
      checkName(v, "name", req.name);
      checkDescription(v, "description", req.description);
      checkLabels(v, "labels", req.labels);
      const rotationPeriodMs = rotationPeriodOf(v, "rotationPeriod", req.rotationPeriod, settings.minRotationMs);
      const algorithm = algorithmOf(v, "defaultAlgorithm", req.defaultAlgorithm);
      v.throwIfAny();
      const view = await manager.createKey({
        parentId: req.parentId,
        name: req.name,
        description: req.description,
        labels: req.labels,
        rotationPeriodMs,
        defaultAlgorithm: algorithm ?? "AES_256",
        owner: call.principal,
      });
      return keyToProto(view, clock.now());
    },

    async updateCryptoKey(req) {
      const v = new Violations();
      const key = req.key;
      if (key === undefined) v.add("key", "is required");
      else checkKeyId(v, "key.id", key.id);
      const paths = maskPathsOf(v, req.updateMask);
      const changes: KeyChanges = {};
      if (key !== undefined) {
        if (paths.has("name")) {
          checkName(v, "key.name", key.name);
          changes.name = key.name;
        }
        if (paths.has("description")) {
          checkDescription(v, "key.description", key.description);
          changes.description = key.description;
        }
        if (paths.has("labels")) {
          checkLabels(v, "key.labels", key.labels);
          changes.labels = key.labels;
        }
        if (paths.has("rotation_period")) {
          // An empty value under the mask clears the period and stops rotation.
          changes.rotationPeriodMs = rotationPeriodOf(v, "key.rotationPeriod", key.rotationPeriod, settings.minRotationMs);
        }
        if (paths.has("next_rotation_time")) {
          changes.nextRotationAt = key.nextRotationTime === undefined ? null : timestampMsOf(v, "key.nextRotationTime", key.nextRotationTime);
        }
        if (paths.has("default_algorithm")) {
          changes.defaultAlgorithm = algorithmOf(v, "key.defaultAlgorithm", key.defaultAlgorithm) ?? "AES_256";
        }
      }
      v.throwIfAny();
      // key is defined here: its absence is a violation above.
      const view = await manager.updateKey(key?.id ?? "", changes);
      return keyToProto(view, clock.now());
    },

    // Synchronous on a cache hit, like Encrypt: no promise, so no deadline timer either; and the same message
    // for as long as the key does not change (keyMessage).
    getCryptoKey(req) {
      if (req.keyId === "" || req.keyId.length > MAX_ID_CHARS) {
        const v = new Violations();
        checkKeyId(v, "keyId", req.keyId);
        v.throwIfAny();
      }
      const view = manager.getKey(req.keyId);
      return view instanceof Promise ? view.then((k) => keyMessage(k, clock.now())) : keyMessage(view, clock.now());
    },

    async destroyCryptoKey(req) {
      const v = new Violations();
      checkKeyId(v, "keyId", req.keyId);
      v.throwIfAny();
      await manager.destroyKey(req.keyId);
      return {};
    },

    async listCryptoKeyVersions(req) {
      const v = new Violations();
      checkKeyId(v, "keyId", req.keyId);
      const page = pageOf(v, req.page);
      v.throwIfAny();
      const now = clock.now();
      const versions = await manager.listVersions(req.keyId, page);
      return { versions: versions.map((r) => versionToProto(r, now)) };
    },

    async createCryptoKeyVersion(req) {
      const v = new Violations();
      checkKeyId(v, "keyId", req.keyId);
      const algorithm = algorithmOf(v, "algorithm", req.algorithm);
      v.throwIfAny();
      return versionToProto(await manager.createVersion(req.keyId, algorithm), clock.now());
    },

    getCryptoKeyVersion(req) {
      versionTarget(req);
      const version = manager.getVersion(req.keyId, req.keyVersionId);
      return version instanceof Promise ? version.then((r) => versionToProto(r, clock.now())) : versionToProto(version, clock.now());
    },

    async destroyCryptoKeyVersion(req) {
      versionTarget(req);
      return versionToProto(await manager.transition(req.keyId, req.keyVersionId, "destroy"), clock.now());
    },

    async disableCryptoKeyVersion(req) {
      versionTarget(req);
      return versionToProto(await manager.transition(req.keyId, req.keyVersionId, "disable"), clock.now());
    },

    async enableCryptoKeyVersion(req) {
      versionTarget(req);
      return versionToProto(await manager.transition(req.keyId, req.keyVersionId, "enable"), clock.now());
    },

    async updateCryptoKeyPrimaryVersion(req) {
      versionTarget(req);
      return keyToProto(await manager.setPrimary(req.keyId, req.keyVersionId), clock.now());
    },

    async restoreCryptoKeyVersion(req) {
      versionTarget(req);
      return versionToProto(await manager.transition(req.keyId, req.keyVersionId, "restore"), clock.now());
    },
  };
}
