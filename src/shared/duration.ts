import type { Duration } from "@bufbuild/protobuf/wkt";

// A Duration's nanos are -999,999,999 to 999,999,999, of the same sign as its seconds (google/protobuf/duration.proto).
// The JSON forms cannot break that; the binary form can: gRPC took {seconds: 86400, nanos: -1}.
export function isValidDuration(d: Duration): boolean {
  if (d.nanos <= -1e9 || d.nanos >= 1e9) return false;
  return !((d.seconds > 0n && d.nanos < 0) || (d.seconds < 0n && d.nanos > 0));
}

export const INVALID_DURATION = "is not a valid Duration: nanos must be below one second, of the same sign as seconds";

// A valid Duration as its JSON form writes it, exactly: "-0.5s", "60.000000001s".
export function durationText(d: Duration): string {
  if (d.nanos === 0) return `${d.seconds}s`;
  const sign = d.seconds < 0n || d.nanos < 0 ? "-" : "";
  const seconds = d.seconds < 0n ? -d.seconds : d.seconds;
  return `${sign}${seconds}.${String(Math.abs(d.nanos)).padStart(9, "0").replace(/0+$/, "")}s`;
}
