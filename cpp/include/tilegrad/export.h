// Symbol visibility for the public API of libtilegrad. Everything not marked is hidden.
#pragma once

#if defined(_WIN32)
#define TILEGRAD_API __declspec(dllexport)
#else
#define TILEGRAD_API __attribute__((visibility("default")))
#endif
