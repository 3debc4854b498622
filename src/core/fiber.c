/* fiber.c - placeholder until the fiber module lands. */
#include "core/fiber.h"
typedef int duro__fiber_placeholder;
