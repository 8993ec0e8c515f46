"""The device regression suite: bundles × devices (adb, ssh, qemu), golden vectors, latency, baselines, JUnit.

`suite.run_suite(SuiteConfig)` is the library entry; `cli.device_app` is `edgekit device`.
Modules: `transports` (how a device is reached) and `facts` (what it is), `preflight`
(host checks before anything is pushed), `session` (what is pushed and launched on one
device), `checks` (what the host concludes from the pulled results), `stats` and
`baseline` (pure decisions), `results` and `reports` (JSON, JUnit, Markdown + PNG).
"""
