import { healthMs } from "./harness.js";

// Probes GET /healthz every 25 ms until its standard input closes, then prints the slowest probe in ms. It runs
// in a process of its own so that the attacking test's own work cannot delay the probes and be blamed on the
// server. Prints "ready" after its first probe.
const url = process.argv[2] ?? "";
let slowest = 0;
let done = false;
process.stdin.on("end", () => (done = true));
process.stdin.resume();
slowest = await healthMs(url);
process.stdout.write("ready\n");
while (!done) {
  slowest = Math.max(slowest, await healthMs(url));
  await new Promise((r) => setTimeout(r, 25));
}
process.stdout.write(`${slowest}\n`);
