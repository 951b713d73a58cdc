// Creates a key, encrypts and decrypts with it over gRPC, using @grpc/grpc-js and the .proto files.
// From the repository's root, with the server running: node examples/grpc-client.mjs
import * as grpc from "@grpc/grpc-js";
import * as loader from "@grpc/proto-loader";

const address = process.env.CLOUDPLANE_ADDRESS ?? "localhost:8080";
const def = loader.loadSync("kms/v1/kms.proto", { includeDirs: ["proto"] });
const { KeyManagerService } = grpc.loadPackageDefinition(def).kms.v1;
const kms = new KeyManagerService(address, grpc.credentials.createInsecure());
// Every call carries the access token (README "Credentials") as the authorization metadata.
const metadata = new grpc.Metadata();
metadata.set("authorization", `Bearer ${process.env.CLOUDPLANE_TOKEN}`);
const call = (method, req) => new Promise((ok, fail) => kms[method](req, metadata, (e, res) => (e ? fail(e) : ok(res))));

// Key names are unique among the live keys of a namespace: a new one on each run.
const key = await call("CreateCryptoKey", { parentId: "demo", name: `grpc-${Date.now().toString(36)}` });
console.log(`created key ${key.id} (${key.name}), primary version ${key.primary.id}`);
const { ciphertext } = await call("Encrypt", { keyId: key.id, keyVersionId: 1, plaintext: Buffer.from("hello") });
console.log(`encrypted "hello" into ${ciphertext.length} bytes`);
const { plaintext } = await call("Decrypt", { keyId: key.id, ciphertext });
console.log(`decrypted: ${plaintext.toString()}`);
kms.close();
