// Creates a key, encrypts and decrypts with it over the Connect protocol, using the generated code in gen/.
// From the repository's root, with the server running: npx tsx examples/connect-client.ts
// The same code runs in browsers with createConnectTransport from @connectrpc/connect-web.
import { createClient } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { KeyManagerService } from "../gen/kms/v1/kms_pb.js";

const address = process.env.CLOUDPLANE_ADDRESS ?? "localhost:8080";
// Every call carries the access token (README "Credentials") in Authorization.
const authorization: Interceptor = (next) => (req) => {
  req.header.set("authorization", `Bearer ${process.env.CLOUDPLANE_TOKEN}`);
  return next(req);
};
const transport = createConnectTransport({ baseUrl: `http://${address}`, httpVersion: "1.1", interceptors: [authorization] });
const kms = createClient(KeyManagerService, transport);

// Key names are unique among the live keys of a namespace: a new one on each run.
const key = await kms.createCryptoKey({ parentId: "demo", name: `connect-${Date.now().toString(36)}` });
console.log(`created key ${key.id} (${key.name}), primary version ${key.primary?.id}`);
const { ciphertext } = await kms.encrypt({ keyId: key.id, keyVersionId: 1, plaintext: new TextEncoder().encode("hello") });
console.log(`encrypted "hello" into ${ciphertext.length} bytes`);
const { plaintext } = await kms.decrypt({ keyId: key.id, ciphertext });
console.log(`decrypted: ${new TextDecoder().decode(plaintext)}`);
