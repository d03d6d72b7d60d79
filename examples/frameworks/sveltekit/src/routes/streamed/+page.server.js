// A promise returned unawaited from a server load is streamed: the page is sent with the
// pending branch of its {#await}, and the value follows, in the same response, once it resolves.
export function load() {
	return {
		slot: process.env.POOL_WORKER_ID ?? null,
		late: new Promise((resolve) => setTimeout(() => resolve('the late part, resolved after 300 ms'), 300))
	};
}
