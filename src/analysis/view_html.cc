// The HTML view: one self-contained file. The tables are rendered here (they read without
// JavaScript); the charts are drawn in the browser by ECharts (npm package "echarts", bundled at
// build time from web/package.json and inlined) from the report's JSON, embedded in the page.
#include <fmt/format.h>

#include "analysis/json_dump.h"
#include "analysis/units.h"
#include "analysis/views.h"

namespace parmon::analysis {

std::string HtmlEscape(std::string_view s) {
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

namespace {

std::string Esc(const std::string& s) {
  return HtmlEscape(s);
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
.pies{display:flex;flex-wrap:wrap}.pie{width:230px;height:210px}
.legend span{margin-right:14px;font-size:13px}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
)";

// Builds the charts from the embedded JSON. Runs only when the library is present. Each chart
// is drawn on its own (an error in one is logged to the console and the others still appear);
// when all are done <html data-charts="N"> says how many were drawn (tests/html waits for it).
constexpr const char* kCharts = R"(
(function(){
'use strict';
const R=JSON.parse(document.getElementById('report-data').textContent);
const iv=R.intervals,S=iv.state_order;
const NAME={running:'running',runnable:'queued',comm_wait:'comm wait',lock_wait:'lock wait',
  timer_wait:'timer wait',io_wait:'I/O wait',other:'other'};
const COLOR={running:'#2e8b57',runnable:'#e67e22',comm_wait:'#3498db',lock_wait:'#c0392b',
  timer_wait:'#9b59b6',io_wait:'#8d6e63',other:'#c8c8c8'};
const anim=!(window.matchMedia&&matchMedia('(prefers-reduced-motion: reduce)').matches);
const charts=[];
const esc=s=>String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
const pct=x=>(x*100).toFixed(x>0&&x<0.1?1:0)+'%';
function secs(ns){const a=Math.abs(ns);return a>=1e9?(ns/1e9).toFixed(2)+' s':a>=1e6?(ns/1e6).toFixed(1)+' ms':
  a>=1e3?(ns/1e3).toFixed(1)+' us':ns+' ns';}
function bytes(b){return b>=1e9?(b/1e9).toFixed(1)+' GB':b>=1e6?(b/1e6).toFixed(1)+' MB':b>=1e3?(b/1e3).toFixed(1)+' kB':b+' B';}
const natural=(a,b)=>a.localeCompare(b,undefined,{numeric:true});
function chart(id,opt,height){const el=document.getElementById(id);if(!el)return;
  try{if(height)el.style.height=height+'px';const c=echarts.init(el);
    c.setOption(Object.assign({animation:anim},opt));charts.push(c);}
  catch(e){console.error('parmon chart '+id+': '+e.message);}}
window.addEventListener('resize',()=>charts.forEach(c=>c.resize()));
// A part of the page whose options cannot be built is logged; the other parts still appear.
function part(name,f){try{f();}catch(e){console.error('parmon charts, '+name+': '+e.message);}}

// States per thread: the program's own threads first, each a stacked bar (every thread without
// MPI; with MPI each rank's main thread and the threads of its process that compute at least 10%
// of their life, parmonShared.programThreads, shared with parmon view). The MPI library's helper
// threads and the launcher's processes, which mostly sleep, are folded into one row each: the
// mean of their threads, so that they neither dominate the axis nor crowd out the ranks.
const P=window.parmonShared;
const threads=R.locations.filter(l=>l.kind==='thread');
const split=P.programThreads(threads);
function folded(label,ls){if(!ls.length)return[];const st={};
  S.forEach(s=>st[s]=ls.reduce((a,l)=>a+l.states_ns[s],0)/ls.length);
  return[{label:label+' ('+ls.length+' threads, mean)',states_ns:st}];}
const barRows=split.own.concat(folded('MPI/runtime helpers',split.helpers),
  folded('launcher, other processes',split.others));
part('states',()=>chart('states',{tooltip:{trigger:'axis',axisPointer:{type:'shadow'},valueFormatter:v=>v.toFixed(3)+' s'},
  legend:{top:0},grid:{left:8,right:48,top:36,bottom:8,containLabel:true},
  xAxis:{type:'value',name:'s'},yAxis:{type:'category',data:barRows.map(l=>l.label),inverse:true},
  series:S.map(s=>({name:NAME[s]||s,type:'bar',stack:'t',itemStyle:{color:COLOR[s]},
    data:barRows.map(l=>l.states_ns[s]/1e9)}))},Math.max(180,24*barRows.length+70)));

// A pie per node: per rank over all the rank's threads (its main thread, its other threads and
// the MPI library's; parmonShared.byRank), else per process when there are several (its threads
// summed), else per thread.
function summed(ls){const st={};S.forEach(s=>st[s]=ls.reduce((a,l)=>a+l.states_ns[s],0));return st;}
function nodes(){
  const ranks=P.byRank(threads);
  if(ranks.length)return{what:'rank (all its threads)',list:ranks.map(([k,ts])=>
    ({label:'rank '+k+(ts.length>1?' ('+ts.length+' threads)':''),st:summed(ts)}))};
  const pids=[...new Set(threads.map(l=>l.pid))];
  if(pids.length>1)return{what:'process',list:pids.map(p=>{const ts=threads.filter(l=>l.pid===p),m=ts.find(l=>l.tid===p)||ts[0];
    return{label:m.label+(ts.length>1?' + '+(ts.length-1)+' threads':''),st:summed(ts)};})};
  return{what:'thread',list:threads.map(l=>({label:l.label,st:l.states_ns}))};
}
part('pies',()=>{
  const N=nodes(),pies=document.getElementById('pies'),MAXPIES=48;if(!pies)return;
  document.getElementById('pies-title').textContent='Time per '+N.what;
  const lg=document.getElementById('pies-legend');
  S.forEach(s=>{const i=document.createElement('span');i.innerHTML='<i style="background:'+COLOR[s]+'"></i>'+esc(NAME[s]||s);lg.appendChild(i);});
  N.list.slice(0,MAXPIES).forEach((n,i)=>{const d=document.createElement('div');d.className='pie';d.id='pie'+i;pies.appendChild(d);
    chart('pie'+i,{title:{text:n.label,left:'center',top:2,textStyle:{fontSize:13}},
      tooltip:{formatter:p=>esc(p.name)+': '+secs(p.value)+' ('+p.percent+'%)'},
      series:[{type:'pie',radius:'48%',center:['50%','56%'],minShowLabelAngle:8,labelLine:{length:6,length2:6},
        label:{fontSize:11,formatter:p=>(p.percent>=9.95?Math.round(p.percent):p.percent.toFixed(1))+'%'},
        data:S.map(s=>({name:NAME[s]||s,value:n.st[s],itemStyle:{color:COLOR[s]}})).filter(x=>x.value>0)}]});});
  if(N.list.length>MAXPIES)document.getElementById('pies-more').textContent=
    'The first '+MAXPIES+' of '+N.list.length+' are shown; the tables below have them all.';
});

// Utilisation over time: a row per location and link, a column per interval.
part('util',()=>{if(iv.count>0){
  const rows=iv.locations.map(l=>({label:l.label,u:l.utilisation,mean:l.mean,sd:l.stddev}))
    .concat(iv.links.map(k=>({label:k.from_label+' \u2192 '+k.to_label,u:k.utilisation,mean:k.mean,sd:k.stddev})));
  const dp=iv.interval_ns>=1e8?1:iv.interval_ns>=1e7?2:3,xs=[],cells=[];
  for(let i=0;i<iv.count;i++)xs.push(((iv.start_ns+i*iv.interval_ns)/1e9).toFixed(dp));
  rows.forEach((r,y)=>r.u.forEach((u,x)=>cells.push([x,y,Math.round(u*1000)/10])));
  chart('util',{tooltip:{formatter:p=>{const r=rows[p.value[1]];return esc(r.label)+' at '+xs[p.value[0]]+' s: '+
      p.value[2]+'%<br>whole window: mean '+pct(r.mean)+', sd '+pct(r.sd);}},
    grid:{left:8,right:32,top:12,bottom:iv.count>40?96:64,containLabel:true},
    xAxis:{type:'category',data:xs,name:'s'},
    yAxis:{type:'category',data:rows.map(r=>r.label+'  '+pct(r.mean)),inverse:true},
    visualMap:{min:0,max:100,orient:'horizontal',left:'center',bottom:0,itemHeight:200,
      text:['100% busy','0%'],inRange:{color:['#f4f8fb','#9ecae1','#2171b5','#08306b']}},
    dataZoom:iv.count>40?[{type:'slider',bottom:38,height:16},{type:'inside'}]:[],
    series:[{type:'heatmap',data:cells,progressive:0}]},Math.max(200,18*rows.length+(iv.count>40?130:100)));
}});

// Communication, per kind of link: the matrix as a heatmap and the process graph.
const util={};iv.locations.forEach(l=>util[l.label]=l.mean);
function linkTip(k,i){return esc(k.from_label)+' \u2192 '+esc(k.to_label)+'<br>'+k.messages+' messages, '+bytes(k.bytes)+
  '<br>in its calls '+secs(k.time_ns)+': waiting '+secs(k.wait_ns)+', transfer '+secs(k.transfer_ns)+
  (iv.links[i]?'<br>in use '+pct(iv.links[i].mean)+' of the window':'');}
['mpi','channel'].forEach(kind=>part(kind+' links',()=>{
  const ls=R.links.map((k,i)=>({k:k,i:i})).filter(x=>x.k.kind===kind);if(!ls.length)return;
  const ends=[...new Set(ls.flatMap(x=>[x.k.from_label,x.k.to_label]))].sort(natural);
  const n=ends.length,long=ends.some(e=>e.length>8),max=Math.max(1,...ls.map(x=>x.k.bytes));
  // Cells about twice as wide as high, the matrix no wider than it needs; the colour scale on its right.
  const cw=Math.max(40,Math.min(110,900/n)),ch=Math.max(22,Math.min(44,560/n)),gw=n*cw+(long?150:80);
  chart('matrix-'+kind,{tooltip:{formatter:p=>linkTip(R.links[p.value[3]],p.value[3])},
    grid:{left:8,width:gw,top:28,bottom:long?8:28,containLabel:true},
    xAxis:{type:'category',data:ends,name:'to',axisLabel:{interval:0,rotate:long?30:0}},
    yAxis:{type:'category',data:ends,name:'from',inverse:true,axisLabel:{interval:0}},
    visualMap:{dimension:2,min:0,max:max,orient:'vertical',left:gw+40,top:28,itemHeight:Math.min(200,n*ch),
      text:[bytes(max),'0 B'],formatter:v=>bytes(Math.round(v)),inRange:{color:['#fdd0a2','#fd8d3c','#d94801','#7f2704']}},
    series:[{type:'heatmap',data:ls.map(x=>[ends.indexOf(x.k.to_label),ends.indexOf(x.k.from_label),x.k.bytes,x.i]),
      label:{show:ends.length<=16,formatter:p=>bytes(p.value[2])},itemStyle:{borderColor:'#fff',borderWidth:1}}]},
    Math.max(200,n*ch+(long?150:90)));
  // The nodes on a circle in their order, clockwise from the top (a ring reads as a ring;
  // parmonShared.circle, as parmon view places them), placed here rather than by ECharts' circular
  // layout: there a curveness bends every edge toward the
  // centre whatever its direction, so the two directions of a link between opposite nodes (the
  // two ranks of a 2-rank code) fell on one straight line. With fixed places a curveness bends an
  // edge to one side of its direction of travel: A -> B and B -> A bow apart.
  const pos=P.circle(n,0,0,300);
  chart('graph-'+kind,{tooltip:{formatter:p=>p.dataType==='edge'?linkTip(R.links[p.data.i],p.data.i):
      esc(p.name)+(util[p.name]!==undefined?': running '+pct(util[p.name])+' of the window':'')},
    series:[{type:'graph',layout:'none',roam:true,symbolSize:46,
      // A square area (width from the data's aspect), centred: the circle stays round.
      top:64,height:352,left:'center',
      label:{show:true,distance:4,lineHeight:15,
        formatter:p=>p.name+(util[p.name]!==undefined?'\n'+pct(util[p.name])+' running':'')},
      edgeSymbol:['none','arrow'],edgeSymbolSize:12,
      edgeLabel:{show:true,fontSize:11,color:'#333',formatter:p=>{const k=R.links[p.data.i],u=iv.links[p.data.i]?iv.links[p.data.i].mean:0;
        return (u>=0.005?pct(u)+' in use':'')+(k.time_ns&&k.wait_ns/k.time_ns>=0.005?(u>=0.005?', ':'')+pct(k.wait_ns/k.time_ns)+' waiting':'');}},
      // Two invisible corners make the laid-out area the circle's square: ECharts fits the nodes'
      // bounding box to the chart, and two nodes alone (one above the other) have no width.
      data:ends.map((e,i)=>{const sy=pos[i][1]/300;
        return{name:e,x:pos[i][0],y:pos[i][1],label:{position:sy<-0.3?'top':sy>0.3?'bottom':pos[i][0]>0?'right':'left'},
          itemStyle:{color:util[e]===undefined?'#bbb':echarts.color.lerp(util[e],['#f5b7b1','#f7dc6f','#2e8b57'])}};})
        .concat([-1,1].map(k=>({name:'\u2060corner'+k,x:360*k,y:360*k,symbolSize:0,label:{show:false},tooltip:{show:false}}))),
      links:ls.map(x=>{const lu=iv.links[x.i]?iv.links[x.i].mean:0,w=x.k.time_ns?x.k.wait_ns/x.k.time_ns:0;
        const back=ls.some(y=>y.k.from_label===x.k.to_label&&y.k.to_label===x.k.from_label&&y!==x);
        return{source:x.k.from_label,target:x.k.to_label,i:x.i,
          lineStyle:{width:1.5+7*lu,opacity:0.85,curveness:back?0.25:0.1,color:echarts.color.lerp(w,['#3498db','#f39c12','#c0392b'])}};})}]},480);
}));
document.documentElement.setAttribute('data-charts',String(charts.length));
})();
)";

// The summary table: what ran, for how long, and what recording it cost.
void HtmlSummary(const Summary& s, std::string& o) {
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
  row("in the program's threads",
      fmt::format("{} (events {}, context-switch records {})",
                  FormatDuration(s.in_thread_overhead_ns), FormatDuration(s.in_thread_events_ns),
                  FormatDuration(s.in_thread_switches_ns)));
  if (s.estimated_slowdown > 0)
    row("cost to the program", fmt::format("~{:.1f}% of its run time", s.estimated_slowdown * 100));
  for (const Summary::SwitchStop& stop : s.switch_stops)
    row("context-switch records", SwitchStopSentence(s, stop));
  o += "</table>\n";
}

// The findings, and the places of the charts (drawn by kCharts from the report data).
void HtmlDiagnosisAndCharts(const Results& r, bool charts, std::string& o) {
  o += "<h2>Diagnosis</h2>\n<ol class=\"diag\">\n";
  for (const auto& f : r.findings)
    o +=
        fmt::format("<li><b>{}</b> [{} of the wall time at stake]<div class=\"ev\">{}</div></li>\n",
                    Esc(f.text), FormatDuration(f.time_at_stake_ns), Esc(f.evidence));
  if (r.findings.empty())
    o += "<li>No bottleneck found.</li>\n";
  o += "</ol>\n";
  if (charts) {
    o += "<h2>States per thread</h2><div id=\"states\" class=\"chart\"></div>\n"
         "<h2 id=\"pies-title\">Time per node</h2><div id=\"pies-legend\" class=\"legend\"></div>"
         "<div id=\"pies\" class=\"pies\"></div><p id=\"pies-more\"></p>\n";
    if (r.intervals.count)
      o += fmt::format(
          "<h2>Utilisation over time</h2><p class=\"ev\">Share of each {} interval a thread "
          "was running, a CPU busy, a link in use; after each name its mean over the window.</p>"
          "<div id=\"util\" class=\"chart\"></div>\n",
          FormatDuration(r.intervals.interval_ns));
    for (const char* kind : {"mpi", "channel"}) {
      bool present = false;
      for (const auto& k : r.links)
        present = present || k.kind == kind;
      if (!present)
        continue;
      std::string what = std::string(kind) == "mpi" ? "MPI ranks" : "channels (pipes, sockets)";
      o += fmt::format(
          "<h2>Communication matrix, {0} (bytes)</h2><div id=\"matrix-{1}\" "
          "class=\"chart\"></div>\n"
          "<h2>Process graph, {0}</h2><p class=\"ev\">Node: share of the window running. Link: "
          "share of the window in its calls; thicker is busier, red is waiting for the partner, "
          "blue moving data.</p><div id=\"graph-{1}\" class=\"chart\"></div>\n",
          what, kind);
    }
  }
}

// One row per location: its states and messages.
void HtmlLocations(const Results& r, std::string& o) {
  o += "<h2>Locations</h2><table><tr><th>location</th><th>wall</th><th>cpu</th>";
  for (int i = 0; i < kStateCount; ++i)
    o += fmt::format("<th>{}</th>", StateName(static_cast<State>(i)));
  o += "<th>MPI msgs out</th><th>bytes out</th><th>MPI msgs in</th><th>bytes in</th><th>MPI</th>"
       "<th>channel writes</th><th>channel reads</th></tr>\n";
  for (const auto& l : r.locations) {
    uint64_t total = Sum(l.states);
    o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td>", Esc(l.label),
                     FormatDuration(l.wall_ns), FormatDuration(l.cpu_ns));
    for (uint64_t v : l.states)
      o += fmt::format("<td>{}</td>", FormatPercent(v, total));
    // MPI messages apart from POSIX channel writes and reads (pipes, sockets, stdout).
    o += fmt::format(
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        FormatCount(l.mpi_messages_sent), FormatBytes(l.mpi_bytes_sent),
        FormatCount(l.mpi_messages_received), FormatBytes(l.mpi_bytes_received),
        FormatDuration(l.mpi_ns),
        FormatCount(l.messages_sent - std::min(l.messages_sent, l.mpi_messages_sent)),
        FormatCount(l.messages_received - std::min(l.messages_received, l.mpi_messages_received)));
  }
  o += "</table>\n";
}

// The links, the wait states and (trace mode) the MPI call sites.
void HtmlCommunication(const Results& r, std::string& o) {
  o += "<h2>Communication</h2><table><tr><th>from</th><th>to</th><th>messages</th>"
       "<th>bytes</th><th>time</th><th>wait</th><th>transfer</th><th>sender wait</th>"
       "<th>receiver wait</th></tr>\n";
  for (const auto& k : r.links)
    o += fmt::format(
        "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
        Esc(k.from_label), Esc(k.to_label), FormatCount(k.messages), FormatBytes(k.bytes),
        FormatDuration(k.time_ns), FormatDuration(k.wait_ns), FormatDuration(k.transfer_ns),
        FormatDuration(k.sender_wait_ns), FormatDuration(k.receiver_wait_ns));
  if (r.links.empty())
    o += "<tr><td colspan=\"9\">No MPI messages or channel traffic were recorded.</td></tr>\n";
  o += "</table>\n<h2>Wait states</h2><table><tr><th>pattern</th><th>location</th><th>call</th>"
       "<th>count</th><th>time</th></tr>\n";
  for (const auto& w : r.wait_states)
    o += fmt::format(
        "<tr><td>{}</td><td class=\"l\">{}</td><td "
        "class=\"l\">{}</td><td>{}</td><td>{}</td></tr>\n",
        Esc(w.pattern), Esc(w.location_label), Esc(w.call), FormatCount(w.instances),
        FormatDuration(w.ns));
  if (r.wait_states.empty())
    o += "<tr><td colspan=\"5\">No time was lost waiting for a partner.</td></tr>\n";
  o += "</table>\n";
  if (!r.mpi.call_sites.empty()) {  // trace mode: where in the program the MPI time goes
    o += "<h2>MPI call sites</h2><table><tr><th>call site</th><th>function</th><th>calls</th>"
         "<th>time</th><th>mean/rank</th><th>max/rank</th><th>at</th><th>CoV</th></tr>\n";
    for (const auto& c : r.mpi.call_sites)
      o += fmt::format(
          "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td>rank {}</td><td>{:.2f}</td></tr>\n",
          Esc(c.site), Esc(c.function), FormatCount(c.calls), FormatDuration(c.ns),
          FormatDuration(static_cast<uint64_t>(c.mean_rank_ns)), FormatDuration(c.max_rank_ns),
          c.max_rank, c.cov);
    o += "</table>\n";
  }
}

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
        "<div class=\"warn\" id=\"lost\">{}: figures for the "
        "locations concerned undercount.</div>\n",
        LostSentence(s.lost_events));
  if (std::string damage = DamageSentence(s); !damage.empty()) {
    damage[0] = 'T';  // "the trace ..." opens the paragraph
    o += fmt::format("<div class=\"warn\">{}</div>\n", Esc(damage));
  }
  HtmlSummary(s, o);
  HtmlDiagnosisAndCharts(r, !chart_js.empty(), o);
  HtmlLocations(r, o);
  HtmlCommunication(r, o);
  o += "<script type=\"application/json\" id=\"report-data\">" + ScriptSafe(DumpJson(ToJson(r))) +
       "</script>\n";
  if (!chart_js.empty()) {
    o += "<script>" + ScriptSafe(chart_js) + "</script>\n";
    o += std::string("<script>") + kCharts + "</script>\n";
  }
  o += "</body></html>\n";
  return o;
}

}  // namespace parmon::analysis
