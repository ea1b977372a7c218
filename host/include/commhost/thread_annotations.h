// SPDX-License-Identifier: Apache-2.0
// Clang's thread-safety attributes (-Wthread-safety), as LevelDB and Abseil spell them:
// state marked GUARDED_BY(mu) may be touched only with mu held, and the compiler checks
// it. Other compilers see empty macros. Use them with commhost::Mutex (mutex.h):
// std::mutex in libstdc++ carries no annotations, so the analysis cannot see it.
#pragma once

#if defined(__clang__)
#define COMMHOST_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define COMMHOST_THREAD_ANNOTATION(x)
#endif

#ifndef GUARDED_BY
#define GUARDED_BY(x) COMMHOST_THREAD_ANNOTATION(guarded_by(x))
#endif
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) COMMHOST_THREAD_ANNOTATION(pt_guarded_by(x))
#endif
#ifndef REQUIRES
#define REQUIRES(...) COMMHOST_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif
#ifndef EXCLUDES
#define EXCLUDES(...) COMMHOST_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif
#ifndef ACQUIRE
#define ACQUIRE(...) COMMHOST_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) COMMHOST_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) COMMHOST_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#endif
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) COMMHOST_THREAD_ANNOTATION(assert_capability(x))
#endif
#ifndef CAPABILITY
#define CAPABILITY(x) COMMHOST_THREAD_ANNOTATION(capability(x))
#endif
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY COMMHOST_THREAD_ANNOTATION(scoped_lockable)
#endif
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS COMMHOST_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif
