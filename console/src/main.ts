// The operator console (/console): asks for an access token, then shows keys with their versions and node pools
// with their tasks, through the generated clients over the Connect protocol (@connectrpc/connect-web). The token
// stays in this tab's sessionStorage, never in localStorage or a cookie.
import { createApi } from "./api.js";
import { byId, input, onSubmit } from "./dom.js";
import { keysView } from "./keys-view.js";
import { poolsView } from "./pools-view.js";

const TOKEN_KEY = "cloudplane.token";

async function signIn(token: string): Promise<void> {
  const api = createApi(token);
  // Checks the token before anything is shown: a wrong one is answered UNAUTHENTICATED here.
  await api.kms.listCryptoKeys({ parentId: input("namespace") });
  sessionStorage.setItem(TOKEN_KEY, token);
  byId("who").textContent = "signed in";
  byId("app").hidden = false;
  const keys = keysView(api);
  poolsView(api);
  await keys.load();
}

let signedIn = false;
onSubmit("signin", async () => {
  if (signedIn) return;
  await signIn(input("token"));
  signedIn = true;
});
const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved !== null) {
  byId<HTMLInputElement>("token").value = saved;
  void signIn(saved).then(() => (signedIn = true), () => sessionStorage.removeItem(TOKEN_KEY));
}
