import type { Route } from "./+types/home";

export function meta({}: Route.MetaArgs) {
  return [
    { title: "New React Router App" },
    { name: "description", content: "Welcome to React Router!" },
  ];
}

export function loader() {
  return { slot: process.env.POOL_WORKER_ID ?? null };
}

export default function Home({ loaderData }: Route.ComponentProps) {
  return (
    <main>
      <h1>Welcome to React Router</h1>
      <p>Rendered by pool slot {loaderData.slot}.</p>
    </main>
  );
}
