import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { CryptoKeyVersion_Algorithm, CryptoKeyVersion_State } from "../../gen/kms/v1/kms_pb.js";
import type { CryptoKey } from "../../gen/kms/v1/kms_pb.js";
import type { Api } from "./api.js";
import { byId, fill, input, onSubmit, row, showError } from "./dom.js";

function time(t: Timestamp | undefined): string {
  return t === undefined ? "" : timestampDate(t).toISOString();
}

function toBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

// Keys of a namespace, the versions of the selected key with their states, and encrypting and decrypting a text
// with it.
export function keysView(api: Api): { load(): Promise<void> } {
  let selected: CryptoKey | null = null;
  let ciphertext: Uint8Array | null = null;

  async function load(): Promise<void> {
    const { keys } = await api.kms.listCryptoKeys({ parentId: input("namespace") });
    fill(
      "keys",
      keys.map((key) => {
        const tr = row([key.name, key.id, key.primary === undefined ? "" : `version ${key.primary.id}`, time(key.createdAt)]);
        if (key.id === selected?.id) tr.className = "selected";
        tr.addEventListener("click", () => void select(key.id).catch(showError));
        return tr;
      }),
    );
  }

  async function select(keyId: string): Promise<void> {
    selected = await api.kms.getCryptoKey({ keyId });
    ciphertext = null;
    byId("ciphertext").textContent = "";
    byId("decrypted").textContent = "";
    byId("key-title").textContent = `${selected.name} (${selected.id})`;
    byId("key-detail").hidden = false;
    await showVersions();
    await load();
  }

  async function showVersions(): Promise<void> {
    if (selected === null) return;
    const key = selected;
    const { versions } = await api.kms.listCryptoKeyVersions({ keyId: key.id });
    fill(
      "versions",
      versions.map((v) => {
        const state = CryptoKeyVersion_State[v.state];
        const tr = row([
          String(v.id),
          [state, `state-${state}`],
          CryptoKeyVersion_Algorithm[v.algorithm],
          time(v.createdAt),
          key.primary?.id === v.id ? "primary" : "",
        ]);
        tr.dataset["version"] = String(v.id);
        return tr;
      }),
    );
  }

  onSubmit("keys-load", load);
  onSubmit("key-create", async () => {
    const key = await api.kms.createCryptoKey({ parentId: input("namespace"), name: input("key-name") });
    await select(key.id);
  });
  byId("version-create").addEventListener("click", () => {
    if (selected === null) return;
    const keyId = selected.id;
    void api.kms
      .createCryptoKeyVersion({ keyId })
      .then(() => select(keyId))
      .catch(showError);
  });
  onSubmit("encrypt", async () => {
    if (selected?.primary === undefined) throw new Error("select a key with a primary version first");
    const sealed = await api.kms.encrypt({ keyId: selected.id, keyVersionId: selected.primary.id, plaintext: new TextEncoder().encode(input("plaintext")) });
    ciphertext = sealed.ciphertext;
    byId("ciphertext").textContent = toBase64(ciphertext);
  });
  onSubmit("decrypt", async () => {
    if (selected === null || ciphertext === null) throw new Error("encrypt a text first");
    const opened = await api.kms.decrypt({ keyId: selected.id, ciphertext });
    byId("decrypted").textContent = `version ${opened.keyVersionId}: ${new TextDecoder().decode(opened.plaintext)}`;
  });
  return { load };
}
