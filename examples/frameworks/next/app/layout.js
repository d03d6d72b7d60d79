// The App Router's root layout, which every app/ page needs. The pages/ router keeps serving /.
export default function RootLayout ({ children }) {
  return (
    <html lang='en'>
      <body>{children}</body>
    </html>
  )
}
