// The HTML view: one self-contained file. The tables are rendered here (they read without
// JavaScript); the charts are drawn in the browser by ECharts (npm package "echarts", bundled at
// build time from web/package.json and inlined) from the report's JSON, embedded in the page.
#include <fmt/format.h>

#include "analysis/units.h"
#include "analysis/views.h"

namespace parmon::analysis {
namespace {

std::string Esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// Embedding text inside <script>: "</" would end the element early.
std::string ScriptSafe(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      o += "<\\/";
      ++i;
    } else {
      o += s[i];
    }
  }
  return o;
}

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:16px;color:#222}
h1{font-size:20px}h2{font-size:17px;border-bottom:1px solid #ccc;margin-top:28px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{padding:2px 8px;text-align:right}
th{background:#f0f0f0}td:first-child,th:first-child,td.l{text-align:left}
.warn{background:#fde2e1;border:1px solid #e74c3c;padding:8px;margin:8px 0}
.note{background:#fff6d6;border:1px solid #e0b000;padding:8px;margin:8px 0}
ol.diag li{margin:6px 0}.ev{color:#666;font-size:12px}.chart{width:100%;height:360px}
.pies{display:flex;flex-wrap:wrap}.pie{width:240px;height:220px}
)";

// Builds the charts from the embedded JSON. Runs only when the library is present.
constexpr const char* kCharts = R"(
(function(){
const R=JSON.parse(document.getElementById('report-data').textContent);
const S=R.intervals.state_order;
const colors=['#2e8b57','#e67e22','#3498db','#c0392b','#9b59b6','#7f8c8d','#d0d0d0'];
const threads=R.locations.filter(l=>l.kind==='thread');
function chart(id,opt){const el=document.getElementById(id);if(!el)return;
  const c=echarts.init(el);c.setOption(opt);window.addEventListener('resize',()=>c.resize());}
chart('states',{color:colors,tooltip:{trigger:'axis'},legend:{data:S},
  grid:{left:140},xAxis:{type:'value',name:'s'},yAxis:{type:'category',data:threads.map(l=>l.label),inverse:true},
  series:S.map(s=>({name:s,type:'bar',stack:'t',data:threads.map(l=>+(l.states_ns[s]/1e9).toFixed(4))}))});
const pies=document.getElementById('pies');
threads.slice(0,32).forEach((l,i)=>{const d=document.createElement('div');d.className='pie';d.id='pie'+i;pies.appendChild(d);
  chart('pie'+i,{color:colors,title:{text:l.label,left:'center',textStyle:{fontSize:12}},tooltip:{},
    series:[{type:'pie',radius:'55%',data:S.map(s=>({name:s,value:l.states_ns[s]})).filter(x=>x.value>0),
      label:{formatter:'{b} {d}%'}}]});});
const iv=R.intervals,t0=iv.start_ns,xs=[];for(let i=0;i<iv.count;i++)xs.push(((t0+i*iv.interval_ns)/1e9).toFixed(3));
chart('util',{tooltip:{trigger:'axis'},legend:{type:'scroll'},xAxis:{type:'category',data:xs,name:'s'},
  yAxis:{type:'value',max:100,name:'%'},
  series:iv.locations.map(l=>({name:l.label,type:'line',showSymbol:false,data:l.utilisation.map(u=>+(u*100).toFixed(1))}))
    .concat(iv.links.slice(0,16).map(k=>({name:k.from_label+'>'+k.to_label,type:'line',lineStyle:{type:'dashed'},showSymbol:false,
      data:k.utilisation.map(u=>+(u*100).toFixed(1))})))});
const ends=[...new Set(R.links.flatMap(k=>[k.from_label,k.to_label]))].sort((a,b)=>a.localeCompare(b,undefined,{numeric:true}));
const cells=R.links.map(k=>[ends.indexOf(k.to_label),ends.indexOf(k.from_label),k.bytes]);
if(R.links.length){
chart('matrix',{tooltip:{formatter:p=>ends[p.value[1]]+' \u2192 '+ends[p.value[0]]+': '+p.value[2]+' bytes'},
  grid:{left:120,bottom:80},xAxis:{type:'category',data:ends,name:'to',axisLabel:{rotate:45}},yAxis:{type:'category',data:ends,name:'from'},
  visualMap:{min:0,max:Math.max(1,...cells.map(c=>c[2])),calculable:true,orient:'horizontal',left:'center',bottom:0},
  series:[{type:'heatmap',data:cells,label:{show:ends.length<=12,formatter:p=>p.value[2]>=1e6?(p.value[2]/1e6).toFixed(1)+'M':p.value[2]>=1e3?(p.value[2]/1e3).toFixed(0)+'k':p.value[2]}}]});
const util={};iv.locations.forEach(l=>util[l.label]=l.mean);
chart('graph',{tooltip:{},series:[{type:'graph',layout:ends.length>2?'circular':'force',roam:true,symbolSize:60,
  label:{show:true,formatter:p=>p.name+'\n'+(util[p.name]!==undefined?(util[p.name]*100).toFixed(0)+'%':'')},
  edgeSymbol:['none','arrow'],edgeSymbolSize:10,force:{repulsion:400,edgeLength:200},
  data:ends.map(e=>({name:e,value:util[e]||0,itemStyle:{color:echarts.color.lerp(util[e]||0,['#f5b7b1','#2e8b57'])}})),
  links:R.links.map(k=>{const w=R.summary.duration_ns||1;return{source:k.from_label,target:k.to_label,
    label:{show:true,formatter:(k.wait_ns*100/w).toFixed(0)+'/'+(k.transfer_ns*100/w).toFixed(0)},
    lineStyle:{width:1+4*Math.min(1,k.time_ns/w),curveness:0.15}}})}]});
}})();
)";

}  // namespace

std::string RenderHtml(const Results& r, const std::string& chart_js) {
  const Summary& s = r.summary;
  std::string o = "<!doctype html>\n<html><head><meta charset=\"utf-8\">\n";
  o += fmt::format("<title>parmon report: {}</title>\n<style>{}</style>\n</head><body>\n",
                   Esc(s.file), kStyle);
  o += fmt::format("<h1>parmon report: {}</h1>\n", Esc(s.file));
  if (chart_js.empty())
    o += "<div class=\"note\" id=\"no-charts\">This report has no charts: the charting library "
         "(ECharts, from npm) was not available when parmon was built. The tables below carry "
         "every figure.</div>\n";
  if (s.lost_events)
    o += fmt::format(
        "<div class=\"warn\" id=\"lost\">{} events were lost: figures for the "
        "locations concerned undercount.</div>\n",
        FormatCount(s.lost_events));
  if (!s.closed_cleanly || s.damaged_events)
    o += fmt::format(
        "<div class=\"warn\">The trace {}; {} events in damaged chunks are missing.</div>\n",
        s.closed_cleanly ? "has damaged chunks" : "was not closed cleanly",
        FormatCount(s.damaged_events));
  o += "<h2>Summary</h2><table>\n";
  auto row = [&](const std::string& k, const std::string& v) {
    o += fmt::format("<tr><td>{}</td><td class=\"l\">{}</td></tr>\n", Esc(k), Esc(v));
  };
  row("command", s.command);
  row("duration", FormatDuration(s.duration_ns));
  row("processes / threads / ranks / cpus",
      fmt::format("{} / {} / {} / {}", s.processes, s.threads, s.ranks, s.cpus));
  row("events", FormatCount(s.events));
  row("lost events", FormatCount(s.lost_events));
  row("recorder CPU", FormatDuration(s.recorder_cpu_ns));
  row("in the program's threads", FormatDuration(s.in_thread_overhead_ns) +
                                      (s.event_cost_source == "measured" ? "" : " (estimated)"));
  o += "</table>\n<h2>Diagnosis</h2>\n<ol class=\"diag\">\n";
  for (const auto& f : r.findings)
    o += fmt::format("<li><b>{}</b> [{} at stake]<div class=\"ev\">{}</div></li>\n", Esc(f.text),
                     FormatDuration(f.time_at_stake_ns), Esc(f.evidence));
  if (r.findings.empty())
    o += "<li>No bottleneck found.</li>\n";
  o += "</ol>\n";
  if (!chart_js.empty())
    o += "<h2>States per location</h2><div id=\"states\" class=\"chart\"></div>\n"
         "<h2>Per location</h2><div id=\"pies\" class=\"pies\"></div>\n"
         "<h2>Utilisation over time</h2><div id=\"util\" class=\"chart\"></div>\n"
         "<h2>Communication matrix (bytes)</h2><div id=\"matrix\" class=\"chart\"></div>\n"
         "<h2>Process graph (node: utilisation; link: wait/transfer % of the run)</h2>"
         "<div id=\"graph\" class=\"chart\" style=\"height:480px\"></div>\n";
  o += "<h2>Locations</h2><table><tr><th>location</th><th>wall</th><th>cpu</th>";
  for (int i = 0; i < kStateCount; ++i)
    o += fmt::format("<th>{}</th>", StateName(static_cast<State>(i)));
  o += "<th>msgs out</th><th>bytes out</th><th>msgs in</th><th>bytes in</th><th>MPI</th></tr>\n";
  for (const auto& l : r.locations) {
    uint64_t total = Sum(l.states);
    o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td>", Esc(l.label),
                     FormatDuration(l.wall_ns), FormatDuration(l.cpu_ns));
    for (uint64_t v : l.states)
      o += fmt::format("<td>{}</td>", FormatPercent(v, total));
    o += fmt::format("<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     FormatCount(l.messages_sent), FormatBytes(l.bytes_sent),
                     FormatCount(l.messages_received), FormatBytes(l.bytes_received),
                     FormatDuration(l.mpi_ns));
  }
  o += "</table>\n<h2>Communication</h2><table><tr><th>from</th><th>to</th><th>messages</th>"
       "<th>bytes</th><th>time</th><th>wait</th><th>transfer</th><th>sender wait</th>"
       "<th>receiver wait</th></tr>\n";
  for (const auto& k : r.links)
    o += fmt::format(
        "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
        Esc(k.from_label), Esc(k.to_label), FormatCount(k.messages), FormatBytes(k.bytes),
        FormatDuration(k.time_ns), FormatDuration(k.wait_ns), FormatDuration(k.transfer_ns),
        FormatDuration(k.sender_wait_ns), FormatDuration(k.receiver_wait_ns));
  o += "</table>\n<h2>Wait states</h2><table><tr><th>pattern</th><th>location</th><th>call</th>"
       "<th>count</th><th>time</th></tr>\n";
  for (const auto& w : r.wait_states)
    o += fmt::format(
        "<tr><td>{}</td><td class=\"l\">{}</td><td "
        "class=\"l\">{}</td><td>{}</td><td>{}</td></tr>\n",
        Esc(w.pattern), Esc(w.location_label), Esc(w.call), FormatCount(w.instances),
        FormatDuration(w.ns));
  o += "</table>\n";
  o += "<script type=\"application/json\" id=\"report-data\">" + ScriptSafe(ToJson(r).dump()) +
       "</script>\n";
  if (!chart_js.empty()) {
    o += "<script>" + ScriptSafe(chart_js) + "</script>\n";
    o += std::string("<script>") + kCharts + "</script>\n";
  }
  o += "</body></html>\n";
  return o;
}

}  // namespace parmon::analysis
