// Rendered on every request (getServerSideProps), as an SSR page under pool is.
export async function getServerSideProps () {
  return { props: { pid: process.pid, slot: process.env.POOL_WORKER_ID || null } }
}

export default function Home ({ pid, slot }) {
  return (
    <main>
      <h1>Hello from Next.js</h1>
      <p>Rendered by process {pid}, pool slot {slot ?? 'none'}.</p>
    </main>
  )
}
