import { readFileSync } from "node:fs";

// Linux /proc readings of a child: peak and current resident memory, and CPU time used so far.

const TICKS_PER_SECOND = 100; // USER_HZ; `getconf CLK_TCK` is 100 on every Linux the bench targets

function statusField(pid: number, field: string): number | null {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match?.[1] === undefined ? null : Number(match[1]) * 1024;
  } catch {
    return null;
  }
}

// VmHWM: the most resident memory the process has had since it started.
export function peakRssBytes(pid: number): number | null {
  return statusField(pid, "VmHWM");
}

export function rssBytes(pid: number): number | null {
  return statusField(pid, "VmRSS");
}

// User plus system CPU seconds of the process (all its threads) so far.
export function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

// Busy and steal time of one CPU (all processes) so far, in seconds, from /proc/stat.
export function cpuBusySeconds(cpu: number): { busy: number; steal: number } | null {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n").find((l) => l.startsWith(`cpu${cpu} `));
    if (line === undefined) return null;
    // user nice system idle iowait irq softirq steal ...
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const busy = (f[0] ?? 0) + (f[1] ?? 0) + (f[2] ?? 0) + (f[5] ?? 0) + (f[6] ?? 0);
    return { busy: busy / TICKS_PER_SECOND, steal: (f[7] ?? 0) / TICKS_PER_SECOND };
  } catch {
    return null;
  }
}
