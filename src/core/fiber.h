/* fiber.h - placeholder until the fiber module lands. */
#ifndef DURO_FIBER_H
#define DURO_FIBER_H
#endif
