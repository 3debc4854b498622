/* fiber.c - placeholder until the fiber module lands. */
#include "core/fiber.h"
