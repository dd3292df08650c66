// Coalesced refetch: an event burst (or events arriving during a fetch) causes at most
// one fetch now and one more after it, never a pile-up and never a timer-driven poll.

export function coalesce(load) {
  let running = null;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await load();
      } while (again);
    })();
    try {
      await running;
    } finally {
      running = null;
    }
  };
  return run;
}
