import { Suspense } from 'react'

// An App Router page that streams, as Next renders pages by default: the shell goes out at once,
// and the part inside <Suspense> once the data it awaits has come (?delay= ms, 300 by default).
export const dynamic = 'force-dynamic'

async function Recommendations ({ delay }) {
  await new Promise((resolve) => setTimeout(resolve, delay))
  return (
    <section className='recommendations'>
      <h2>Recommended for you</h2>
      <p>Rendered {delay} ms after the shell.</p>
    </section>
  )
}

export default async function Streamed ({ searchParams }) {
  const { delay } = await searchParams
  const ms = Math.min(Math.max(Number(delay ?? 300) || 0, 0), 10000)
  return (
    <main>
      <h1>Streamed from Next.js</h1>
      <p>The shell, rendered by process {process.pid}, pool slot {process.env.POOL_WORKER_ID ?? 'none'}.</p>
      <Suspense fallback={<p className='recommendations-loading'>Loading recommendations…</p>}>
        <Recommendations delay={ms} />
      </Suspense>
    </main>
  )
}
