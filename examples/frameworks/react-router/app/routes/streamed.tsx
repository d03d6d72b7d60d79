import { Suspense } from "react";
import { Await } from "react-router";
import type { Route } from "./+types/streamed";

// A promise returned unawaited from a loader is streamed: the page is sent with the Suspense
// fallback, and the value follows, in the same response, once it resolves.
export function loader() {
  return {
    slot: process.env.POOL_WORKER_ID ?? null,
    late: new Promise<string>((resolve) =>
      setTimeout(() => resolve("the late part, resolved after 300 ms"), 300),
    ),
  };
}

export default function Streamed({ loaderData }: Route.ComponentProps) {
  return (
    <main>
      <h1>A streamed page</h1>
      <p>The shell, rendered by pool slot {loaderData.slot}.</p>
      <Suspense fallback={<p>Loading…</p>}>
        <Await resolve={loaderData.late}>{(late) => <p id="late">{late}</p>}</Await>
      </Suspense>
    </main>
  );
}
