#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>
static uint64_t s = 0x9e3779b97f4a7c15ULL;
static uint64_t nx(void){ s ^= s<<13; s ^= s>>7; s ^= s<<17; return s; }
static void out(double v){ printf("%a %.10g\n", v, v); }
int main(void){
  double fixed[] = {0.0, -0.0, 1.0, 1e-6, 1.323333333e-06, 1e10, 1e9, 9999999999.0, 99999999995.0, 1234567890123.0,
    0.0001, 0.00001, 0.000099999999995, 123456.5, 0.5, 1e-300, 5e-324, 1.7976931348623157e308, 2.5, 12345678905.0,
    54.30914011, 4.7468576, 17501292292.0, 0.1, 0.2, 0.3, 1.0/3.0, 2.0/3.0, 100.0, 1e21, 1e22, 123e-20, -3.75, 9.9999999995, 0.00099999999995};
  for (size_t i=0;i<sizeof fixed/sizeof fixed[0];i++) out(fixed[i]);
  for (int i=0;i<800;i++){ uint64_t b = nx(); double v; memcpy(&v,&b,8); if (isnan(v)||isinf(v)) continue; out(v); }
  for (int e=-12;e<=14;e++) for (int i=0;i<40;i++){ double m = (double)(nx()%100000000000ULL)/1e10; out(m*pow(10,e)); out(round(m*1e4)/1e4*pow(10,e)); }
  for (int i=0;i<200;i++){ out((double)(nx()%100000000000000ULL)+0.5); out((double)(nx()%10000000000ULL)*5+5); }
  return 0;
}
