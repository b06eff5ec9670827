#ifndef SLUICE_AUDIT_H
#define SLUICE_AUDIT_H
#endif
