/**
 * How a cost grows with its input, for tests that a scan stays linear. CPU time, not wall time, and
 * the least of several tries: another thread's GC or a busy machine only ever adds to one try.
 */

/** Microseconds of this process's CPU that `run` takes, the least of `tries`. */
export async function cpuMicros(run: () => unknown, tries = 3): Promise<number> {
  let least = Infinity;
  for (let i = 0; i < tries; i++) {
    const start = process.cpuUsage();
    await run();
    const used = process.cpuUsage(start);
    least = Math.min(least, used.user + used.system);
  }
  return least;
}

/**
 * The cost of `run(n * factor)` over that of `run(n)`: about `factor` for a linear scan, `factor`²
 * for a quadratic one. Pick `n` so that `run(n)` takes milliseconds, not microseconds.
 */
export async function growth(run: (n: number) => unknown, n: number, factor = 8) {
  await run(n); // warm up the JIT
  const small = await cpuMicros(() => run(n));
  const large = await cpuMicros(() => run(n * factor));
  return { ratio: large / Math.max(small, 1), said: `${large} µs at ${n * factor}, ${small} µs at ${n}` };
}
