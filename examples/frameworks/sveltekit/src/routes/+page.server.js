export function load() {
	return { slot: process.env.POOL_WORKER_ID ?? null };
}
